//! `hdl backup --peer P --secret-file F --out FILE`: a consistent backup of a running
//! cluster, taken without stopping writes, into one file with a checksum
//! ([`crate::replication::backup`]); `hdl restore` makes a new set from it.
//!
//! Over the peer port with the cluster secret, as `hdl cluster` (module
//! [`crate::node::backup`], the node's side): the cluster map is read fresh at `--peer`;
//! each replica set that owns slots (the set of `--peer`'s node when the cluster has
//! no ring) is asked for a snapshot of its store, taken after every write acknowledged
//! before the call, at one member (`--peer`'s node for its own set, else the first of
//! the set's members that answers); then the map is read fresh again. Had its epoch
//! moved (a slot changed hands, a set changed members), the snapshots are dropped and
//! taken again, at most [`ATTEMPTS`] times; so every section is of the sets as one
//! epoch of the map describes them. The snapshots are then copied in chunks into
//! `FILE.partial` (mode 0600: a backup holds every secret key), which is read back
//! and verified whole, synced, and renamed to `FILE`.

use std::collections::BTreeSet;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::node::backup::{BackupAnswer, BackupCall, Opened};
use crate::node::calls::{NodeAnswer, NodeCall};
use crate::placement::ClusterMap;
use crate::replication::backup::{self, BackupHeader, BackupSummary, BackupWriter, SectionHead};
use crate::replication::network::read_secret_file;
use crate::replication::{AdminClient, SetId};
use anyhow::{Context, bail};
use clap::Args;

use super::cluster::Target;
use super::cluster_calls::{ask, set_info, unexpected};
use super::whole_file::WholeFile;

/// How long one call may take: a snapshot of a large store is written in one.
const CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How many times the snapshots are taken before a map that keeps changing is given up
/// on.
const ATTEMPTS: usize = 3;

/// Arguments of `hdl backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    #[command(flatten)]
    target: Target,
    /// The backup file to write (whole or not at all, mode 0600).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// A set's snapshot taken for the backup, and the member holding it.
#[derive(Debug)]
struct Section {
    set: SetId,
    peer: SocketAddr,
    opened: Opened,
}

/// Takes the backup and says what it holds.
pub fn run(args: &BackupArgs) -> anyhow::Result<()> {
    let secret = read_secret_file(&args.target.secret_file)?;
    let client = AdminClient::new(secret, CALL_TIMEOUT);
    let summary = super::connect::runtime()?.block_on(async {
        let (map, sections) = take(&client, args.target.peer).await?;
        let written = write(&client, &map, &sections, &args.out).await;
        if written.is_err() {
            close(&client, &sections).await;
        }
        written
    })?;
    let sets: Vec<String> = summary
        .header
        .sections
        .iter()
        .map(|section| section.set.0.to_string())
        .collect();
    let handles: u64 = summary.handles.iter().sum();
    println!(
        "backed up replica set{} {} ({handles} handle records) at cluster map epoch {} to {}",
        if sets.len() == 1 { "" } else { "s" },
        sets.join(", "),
        summary.header.epoch,
        args.out.display()
    );
    Ok(())
}

/// Snapshots of every set that owns slots, all taken at one epoch of the map; the map.
async fn take(
    client: &AdminClient,
    peer: SocketAddr,
) -> anyhow::Result<(ClusterMap, Vec<Section>)> {
    let mut changes = Vec::new();
    for _ in 0..ATTEMPTS {
        let map = fresh_map(client, peer).await?;
        let mut sections = Vec::new();
        for set in sets_to_back_up(client, peer, &map).await? {
            match open(client, peer, &map, set).await {
                Ok(section) => sections.push(section),
                Err(error) => {
                    close(client, &sections).await;
                    return Err(error);
                }
            }
        }
        let after = fresh_map(client, peer).await;
        if matches!(&after, Ok(after) if after.epoch == map.epoch) {
            return Ok((map, sections));
        }
        close(client, &sections).await;
        let epoch = after?.epoch;
        eprintln!(
            "the cluster map changed while the snapshots were taken (epoch {} to {epoch}): taking them again",
            map.epoch
        );
        changes.push(format!("{} to {epoch}", map.epoch));
    }
    bail!(
        "the cluster map changed during each of {ATTEMPTS} attempts (epochs {}): slots are \
         moving or sets changing members; back up again once `hdl cluster status` shows no moves",
        changes.join(", ")
    )
}

/// The sets a backup holds: those owning slots of the ring, or the set of the node at
/// `peer` when there is no ring.
async fn sets_to_back_up(
    client: &AdminClient,
    peer: SocketAddr,
    map: &ClusterMap,
) -> anyhow::Result<Vec<SetId>> {
    if !map.slots.is_empty() {
        let owners: BTreeSet<SetId> = map.slots.iter().copied().collect();
        return Ok(owners.into_iter().collect());
    }
    let info = set_info(client, peer).await?;
    let set = info
        .set
        .with_context(|| format!("the node at {peer} belongs to no replica set yet"))?;
    Ok(vec![set])
}

/// A snapshot of `set`, taken at `peer` if it is a member, else at the first of its
/// members (as `map` records them) that takes one.
async fn open(
    client: &AdminClient,
    peer: SocketAddr,
    map: &ClusterMap,
    set: SetId,
) -> anyhow::Result<Section> {
    let members = map.sets.get(&set).map(|record| &record.members);
    let mut peers: Vec<SocketAddr> = members
        .into_iter()
        .flat_map(|members| members.values().map(|member| member.node.peer))
        .collect();
    if peers.is_empty() || peers.contains(&peer) {
        peers.retain(|other| *other != peer);
        peers.insert(0, peer);
    }
    let mut failures = Vec::new();
    for at in peers {
        match backup_call(client, at, BackupCall::Open { set }).await {
            Ok(BackupAnswer::Opened(opened)) => {
                return Ok(Section {
                    set,
                    peer: at,
                    opened,
                });
            }
            Ok(other) => failures.push(format!("the node at {at} answered {other:?}")),
            Err(error) => failures.push(format!("{error:#}")),
        }
    }
    bail!(
        "no member of replica set {} took a snapshot: {}",
        set.0,
        failures.join("; ")
    )
}

/// Writes the backup of `sections`, taken at `map`'s epoch, to `path`; what it holds,
/// as read back.
async fn write(
    client: &AdminClient,
    map: &ClusterMap,
    sections: &[Section],
    path: &Path,
) -> anyhow::Result<BackupSummary> {
    let header = BackupHeader {
        created_micros: u64::try_from(crate::clock::unix_micros()).context("the clock")?,
        epoch: map.epoch,
        owners: map.slots.clone(),
        sections: sections
            .iter()
            .map(|section| SectionHead {
                set: section.set,
                member: section.opened.member,
                applied: section.opened.applied,
                length: section.opened.length,
            })
            .collect(),
    };
    let (whole, file) = WholeFile::create(path, 0o600)?;
    let mut writer = BackupWriter::new(BufWriter::with_capacity(1 << 20, file), &header)?;
    for section in sections {
        copy_section(client, section, &mut writer).await?;
    }
    let out = writer.finish()?;
    let mut file = out.into_inner().map_err(|error| error.into_error())?;
    let summary = backup::verify(&mut file).with_context(|| {
        format!(
            "the backup written to {} does not read back",
            path.display()
        )
    })?;
    whole.keep(&file)?;
    Ok(summary)
}

/// Copies the snapshot of `section`, chunk by chunk, into `writer`.
async fn copy_section<W: std::io::Write>(
    client: &AdminClient,
    section: &Section,
    writer: &mut BackupWriter<W>,
) -> anyhow::Result<()> {
    let (id, length) = (section.opened.id, section.opened.length);
    let mut offset = 0;
    // Each chunk is at least one octet: at most `length` of them.
    while offset < length {
        let call = BackupCall::Read { id, offset };
        let bytes = match backup_call(client, section.peer, call).await? {
            BackupAnswer::Bytes(bytes) if !bytes.is_empty() => bytes,
            other => bail!(
                "the node at {} answered {other:?} for replica set {}'s snapshot at octet {offset}",
                section.peer,
                section.set.0
            ),
        };
        writer.section_bytes(&bytes)?;
        offset += bytes.len() as u64;
    }
    Ok(())
}

/// Drops the snapshots of `sections` at their members (what cannot be reached drops
/// them itself once idle).
async fn close(client: &AdminClient, sections: &[Section]) {
    for section in sections {
        let call = BackupCall::Close {
            id: section.opened.id,
        };
        let _ = backup_call(client, section.peer, call).await;
    }
}

/// The cluster map, read fresh at `peer`.
async fn fresh_map(client: &AdminClient, peer: SocketAddr) -> anyhow::Result<ClusterMap> {
    match backup_call(client, peer, BackupCall::Map).await? {
        BackupAnswer::Map(map) => Ok(map),
        other => bail!("the node at {peer} answered {other:?} to a request for the cluster map"),
    }
}

/// Sends `call` to the node at `peer`; a refusal is an error naming the node.
async fn backup_call(
    client: &AdminClient,
    peer: SocketAddr,
    call: BackupCall,
) -> anyhow::Result<BackupAnswer> {
    match ask(client, peer, &NodeCall::Backup(call)).await? {
        NodeAnswer::Backup(BackupAnswer::Refused(reason)) => bail!("the node at {peer}: {reason}"),
        NodeAnswer::Backup(answer) => Ok(answer),
        other => Err(unexpected(peer, &other)),
    }
}

//! `hdl cluster status` and `hdl cluster site-values`: the cluster as its map and its
//! members describe it.
//!
//! Status reads the cluster map from the node at `--peer` (ring, epoch, moves in
//! progress, the sets and their recorded members), then asks each set's members for
//! their own status in the set's group (role, applied index, lag behind the primary)
//! and the primary for the number of handles its store holds. A member that does not
//! answer is listed as unreachable; a set none of whose members answers is listed
//! with the members the map records.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::config::{Config, SiteConfig};
use crate::placement::{ClusterAdmin, ClusterMap, FIRST_SET};
use crate::replication::admin::{Member, MemberStatus};
use crate::replication::{GroupId, NodeId, SetId};
use crate::restjson::structured::site_json;
use crate::service::site::describe_cluster;
use anyhow::Context;
use serde_json::{Value, json};

use super::cluster::{Target, admin};
use super::cluster_calls::{cluster_map, server_key, set_info};

/// How long one member has to answer a status call.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// One replica set as its members describe it.
struct SetReport {
    id: SetId,
    leader: Option<NodeId>,
    members: Vec<Member>,
    rows: Vec<Value>,
    slots: u32,
    handles: Option<u64>,
}

impl SetReport {
    fn json(&self) -> Value {
        json!({
            "id": self.id.0,
            "leader": self.leader,
            "slots": self.slots,
            "handles": self.handles,
            "members": self.rows,
        })
    }
}

/// Prints the ring and every set, as tables or (`as_json`) one JSON object.
pub(super) async fn status(target: &Target, as_json: bool) -> anyhow::Result<()> {
    let admin = admin(target, STATUS_TIMEOUT)?;
    let map = cluster_map(admin.client(), target.peer).await?;
    let own = set_info(admin.client(), target.peer).await?.set;
    let mut ids: BTreeSet<SetId> = map.sets.keys().copied().collect();
    ids.extend(own);
    let slots = map.slots_per_set();
    let mut sets = Vec::new();
    for id in ids {
        let recorded: Vec<Member> = map
            .sets
            .get(&id)
            .map(|set| set.members.values().cloned().collect())
            .unwrap_or_default();
        let mut peers: Vec<SocketAddr> = recorded.iter().map(|m| m.node.peer).collect();
        if own == Some(id) {
            peers.insert(0, target.peer);
        }
        let owned = slots.get(&id).copied().unwrap_or(0);
        sets.push(set_report(&admin, id, &peers, recorded, owned).await);
    }
    // The asked node's own set (set 1 for a node of none) heads the report.
    let own_id = own.unwrap_or(FIRST_SET);
    let headline = sets.iter().find(|set| set.id == own_id);
    if as_json {
        let everyone: Vec<&Member> = sets.iter().flat_map(|set| &set.members).collect();
        let report = json!({
            "leader": headline.and_then(|set| set.leader),
            "members": headline.map_or(Value::Array(Vec::new()), |set| Value::Array(set.rows.clone())),
            "epoch": map.epoch,
            "slot_count": map.slot_count(),
            "migrations": migrations(&map),
            "sets": sets.iter().map(SetReport::json).collect::<Vec<_>>(),
            "map": { "sets": recorded_sets(&map) },
            "metadata": metadata(&admin, &everyone).await,
        });
        println!("{report}");
    } else {
        print_report(&map, &sets);
    }
    Ok(())
}

/// Asks the members of set `id` (found through the first of `peers` that answers)
/// for their status, and its primary for its handle count.
async fn set_report(
    admin: &ClusterAdmin,
    id: SetId,
    peers: &[SocketAddr],
    recorded: Vec<Member>,
    slots: u32,
) -> SetReport {
    let group = GroupId::Set(id);
    let mut asked = None;
    for peer in peers {
        if let Ok(status) = admin.status(*peer, group).await {
            asked = Some(status);
            break;
        }
    }
    let leader = asked.as_ref().and_then(|status| status.leader);
    let members = asked.map_or(recorded, |status| status.members);
    let mut answers = Vec::new();
    for member in &members {
        let status = admin.status(member.node.peer, group).await.ok();
        answers.push((member, status));
    }
    let leader_last_log = answers
        .iter()
        .filter_map(|(_, status)| status.as_ref())
        .find(|status| Some(status.id) == status.leader)
        .and_then(|leader| leader.last_log);
    let rows = answers
        .iter()
        .map(|(member, status)| row(member, status.as_ref(), leader_last_log))
        .collect();
    let holder = members
        .iter()
        .find(|m| Some(m.id) == leader)
        .or(members.first());
    let handles = match holder {
        Some(member) => set_info(admin.client(), member.node.peer)
            .await
            .ok()
            .map(|info| info.handles),
        None => None,
    };
    SetReport {
        id,
        leader,
        members,
        rows,
        slots,
        handles,
    }
}

fn migrations(map: &ClusterMap) -> Vec<Value> {
    let moves = map.migrations.iter().map(|(slot, migration)| {
        json!({
            "slot": slot.0,
            "from": migration.from.0,
            "to": migration.to.0,
            "step": format!("{:?}", migration.step).to_lowercase(),
        })
    });
    moves.collect()
}

fn recorded_sets(map: &ClusterMap) -> Vec<Value> {
    let sets = map
        .sets
        .iter()
        .map(|(id, set)| json!({"id": id.0, "members": set.members.keys().collect::<Vec<_>>()}));
    sets.collect()
}

/// The metadata group as each of `members` sees it: its role there and its leader.
async fn metadata(admin: &ClusterAdmin, members: &[&Member]) -> Value {
    let mut rows = Vec::new();
    for member in members {
        let status = admin.status(member.node.peer, GroupId::Map).await.ok();
        rows.push(json!({
            "id": member.id,
            "role": status.as_ref().map_or("unreachable", |s| s.role.name()),
            "leader": status.as_ref().and_then(|s| s.leader),
            "applied": status.as_ref().and_then(|s| s.applied),
        }));
    }
    Value::Array(rows)
}

fn row(member: &Member, status: Option<&MemberStatus>, leader_last_log: Option<u64>) -> Value {
    let applied = status.and_then(|s| s.applied);
    let lag = leader_last_log.map(|last| last.saturating_sub(applied.unwrap_or(0)));
    json!({
        "id": member.id,
        "role": status.map_or("unreachable", |s| s.role.name()),
        "voter": member.voter,
        "pid": status.map(|s| s.pid),
        "handle": member.node.handle.to_string(),
        "peer": member.node.peer.to_string(),
        "http": member.node.http.map(|http| http.to_string()),
        "applied": applied,
        "lag": lag,
    })
}

fn print_report(map: &ClusterMap, sets: &[SetReport]) {
    let ring = match map.slot_count() {
        0 => "no ring yet".to_owned(),
        count => format!("{count} slots"),
    };
    println!(
        "epoch {}, {ring}, {} moves in progress",
        map.epoch,
        map.migrations.len()
    );
    for (slot, migration) in &map.migrations {
        println!(
            "  slot {}: set {} -> set {}, {:?}",
            slot.0, migration.from.0, migration.to.0, migration.step
        );
    }
    for set in sets {
        let handles = set.handles.map_or("?".to_owned(), |n| n.to_string());
        let leader = set.leader.map_or("none".to_owned(), |id| id.to_string());
        println!();
        println!(
            "set {}: {} slots, {handles} handles, primary {leader}",
            set.id.0, set.slots
        );
        print_table(&set.rows);
    }
}

fn print_table(rows: &[Value]) {
    println!(
        "{:>4}  {:<11}  {:>8}  {:<21}  {:<21}  {:>8}  {:>6}",
        "id", "role", "pid", "handle", "peer", "applied", "lag"
    );
    for row in rows {
        let text = |key: &str| match &row[key] {
            Value::Null => "-".to_owned(),
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        println!(
            "{:>4}  {:<11}  {:>8}  {:<21}  {:<21}  {:>8}  {:>6}",
            text("id"),
            text("role"),
            text("pid"),
            text("handle"),
            text("peer"),
            text("applied"),
            text("lag")
        );
    }
}

/// Prints the HS_SITE of each member rank, one JSON object a line: `rank`, `serial`,
/// `site` (the REST JSON of the value) and `hex` (its RFC 3652 encoding). One set (or
/// no ring yet) has one HS_SITE, printed as rank 0. Each server entry carries its
/// member's server key, asked of the member; one that does not answer is named on
/// stderr and its entry has no key.
pub(super) async fn site_values(target: &Target, config: Option<&Path>) -> anyhow::Result<()> {
    let site = match config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Config::from_toml(&text)
                .with_context(|| format!("in {}", path.display()))?
                .site
        }
        None => SiteConfig::default(),
    };
    let admin = admin(target, STATUS_TIMEOUT)?;
    let map = cluster_map(admin.client(), target.peer).await?;
    let ranks = if map.sets.len() > 1 && map.slot_count() > 0 {
        map.sets
            .values()
            .map(|set| set.members.len())
            .max()
            .unwrap_or(1)
    } else {
        1
    };
    let keys = member_keys(admin.client(), &map).await;
    for rank in 0..ranks.max(1) {
        let info = describe_cluster(&site, &map, rank, &keys);
        let hex = info.encode().iter().fold(String::new(), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        });
        let line = json!({
            "rank": rank,
            "serial": info.serial_number,
            "site": site_json(&info),
            "hex": hex,
        });
        println!("{line}");
    }
    Ok(())
}

/// The server key of every member the map records that tells it.
async fn member_keys(
    client: &crate::replication::AdminClient,
    map: &ClusterMap,
) -> BTreeMap<NodeId, Vec<u8>> {
    let mut keys = BTreeMap::new();
    for member in map.sets.values().flat_map(|set| set.members.values()) {
        match server_key(client, member.node.peer).await {
            Ok(key) => {
                keys.insert(member.id, key);
            }
            Err(error) => eprintln!("node {}: no server key: {error:#}", member.id),
        }
    }
    keys
}

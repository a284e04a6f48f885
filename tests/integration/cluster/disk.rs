//! Disk faults on one member of a set of three under writes: its disk fills up (a
//! small tmpfs as its data directory), or its disk fails at fsync (ext4 on a loop
//! device over a sparse file on a tmpfs too small for it: writes land in the page
//! cache, the flush fails). Either way the member stops, non-zero, saying why; the two
//! others go on taking writes and lose nothing acknowledged; a member whose full disk
//! is given room catches up on its data.
//!
//! Mounting needs root, and the fsync fault a loop device and `mkfs.ext4`; where they
//! are not permitted or missing, the test says so on stderr and returns. Everything
//! mounted is unmounted when the test ends, however it ends.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use hdl::client::Client;
use hdl::values::HandleValue;

use super::{Set, assert_resolves_data, create_request, receive};
use crate::harness::{Listening, admin_credentials};

/// Bytes of each value written: a few hundred writes fill the small disks below.
const VALUE_BYTES: usize = 15_000;
/// The most writes acknowledged before the faulty member must have stopped.
const MAX_WRITES: usize = 3_000;
/// How long the faulty member has to stop once writes begin.
const FILL_WITHIN: Duration = Duration::from_secs(180);

/// File systems mounted for one test, unmounted in reverse order (lazily, so a
/// process still holding one does not keep it) when dropped, with the loop device
/// detached.
struct Mounted {
    points: Vec<PathBuf>,
    loop_device: Option<String>,
}

impl Mounted {
    /// A tmpfs of `size` (as `mount -o size=` takes it), private to its owner, at `at`.
    fn tmpfs(at: &Path, size: &str) -> Result<Mounted, String> {
        fs::create_dir_all(at).map_err(|error| format!("{}: {error}", at.display()))?;
        let options = format!("size={size},mode=0700");
        run(
            "mount",
            &["-t", "tmpfs", "-o", &options, "tmpfs", &path_arg(at)],
        )?;
        Ok(Mounted {
            points: vec![at.to_owned()],
            loop_device: None,
        })
    }

    /// ext4 at `at`, `capacity` bytes as it sees it, on a loop device over a sparse
    /// file in a tmpfs of `room` at `backing`: once the tmpfs is full, writes still
    /// succeed into the page cache and their fsync fails.
    fn thin_ext4(at: &Path, backing: &Path, room: &str, capacity: u64) -> Result<Mounted, String> {
        let mut mounted = Mounted::tmpfs(backing, room)?;
        let image = backing.join("disk.img");
        fs::File::create(&image)
            .and_then(|file| file.set_len(capacity))
            .map_err(|error| format!("{}: {error}", image.display()))?;
        let image = path_arg(&image);
        let mkfs = ["-q", "-F", "-N", "256", "-O", "^has_journal"];
        run(
            "mkfs.ext4",
            &[&mkfs[..], &["-E", "lazy_itable_init=0", &image]].concat(),
        )?;
        let device = run("losetup", &["-f", "--show", &image])?.trim().to_owned();
        mounted.loop_device = Some(device.clone());
        fs::create_dir_all(at).map_err(|error| format!("{}: {error}", at.display()))?;
        run("mount", &[&device, &path_arg(at)])?;
        mounted.points.push(at.to_owned());
        fs::set_permissions(at, fs::Permissions::from_mode(0o700))
            .map_err(|error| format!("{}: {error}", at.display()))?;
        Ok(mounted)
    }

    /// Gives the first file system (a tmpfs) `size` in all.
    fn resize(&self, size: &str) {
        let options = format!("remount,size={size}");
        run("mount", &["-o", &options, &path_arg(&self.points[0])]).expect("resize the tmpfs");
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let mut points = self.points.iter().rev();
        if let Some(last) = points.next() {
            unmount(last);
        }
        if let Some(device) = &self.loop_device
            && let Err(error) = run("losetup", &["-d", device])
        {
            eprintln!("cannot detach {device}: {error}");
        }
        points.for_each(|point| unmount(point));
    }
}

fn unmount(point: &Path) {
    if let Err(error) = run("umount", &["-l", &path_arg(point)]) {
        eprintln!("cannot unmount {}: {error}", point.display());
    }
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs `program` with `args`; its stdout, or why it failed.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|error| format!("{program}: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {args:?}: {} {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// A value of [`VALUE_BYTES`] for `name`.
fn big_value(name: &str) -> HandleValue {
    let mut data = name.as_bytes().to_vec();
    data.resize(VALUE_BYTES, b'.');
    HandleValue::new(1, "URL", data)
}

/// Creates `test/disk-N` with a big value through the members at `servers` until
/// `stop`; sends the name of every acknowledged create.
fn write_big(servers: Vec<Listening>, stop: &AtomicBool, acked: &mpsc::Sender<String>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let handles = servers.iter().map(|listening| listening.handle).collect();
    let client = Client::new(handles).with_credentials(admin_credentials());
    for n in 0..MAX_WRITES * 2 {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let name = format!("test/disk-{n}");
        let request = create_request(&name, big_value(&name));
        if runtime.block_on(client.admin(request)).is_ok() && acked.send(name).is_err() {
            return;
        }
    }
}

/// Writes through the members other than `faulty` until `faulty` has exited and ten
/// more creates were acknowledged; every acknowledged name, and what `faulty` said on
/// stderr.
fn write_until_it_stops(set: &mut Set, faulty: usize) -> (Vec<String>, String) {
    let others: Vec<Listening> = (0..set.members.len())
        .filter(|&index| index != faulty)
        .map(|index| set.members[index].listening)
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (sender, acked) = mpsc::channel();
    let writer = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || write_big(others, &stop, &sender))
    };
    let mut names = Vec::new();
    let deadline = Instant::now() + FILL_WITHIN;
    let status = loop {
        receive(&acked, 1, &mut names);
        if let Some(status) = set.members[faulty].try_exit() {
            break status;
        }
        assert!(
            names.len() < MAX_WRITES && Instant::now() < deadline,
            "member {} still runs after {} writes",
            set.members[faulty].id,
            names.len()
        );
    };
    // The two others go on.
    receive(&acked, 10, &mut names);
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    names.extend(acked.try_iter());
    assert!(!status.success(), "it stopped with {status}");
    let said = set.stderr(faulty);
    eprintln!(
        "member {} stopped after {} acknowledged writes: {said}",
        set.members[faulty].id,
        names.len()
    );
    (names, said)
}

fn assert_resolved_everywhere_but(set: &Set, faulty: usize, names: &[String]) {
    for (index, member) in set.members.iter().enumerate() {
        if index != faulty {
            for name in names {
                assert_resolves_data(member, name, &big_value(name).data);
            }
        }
    }
}

#[test]
fn a_member_whose_disk_fills_stops_saying_why_and_catches_up_given_room() {
    let mut set = Set::empty();
    let disk = match Mounted::tmpfs(&set.data_dir(3), "4m") {
        Ok(disk) => disk,
        Err(reason) => {
            eprintln!("full-disk test not run: cannot mount a tmpfs: {reason}");
            return;
        }
    };
    set.form_members(3);
    let full = 2;
    let (names, said) = write_until_it_stops(&mut set, full);
    assert!(
        said.contains("stopped on this node") && said.contains("No space left on device"),
        "it did not say why it stopped: {said}"
    );
    assert_resolved_everywhere_but(&set, full, &names);

    disk.resize("256m");
    set.restart(full);
    let id = set.members[full].id;
    set.await_status(0, "the member given room caught up", |s| {
        s["members"]
            .as_array()
            .is_some_and(|members| members.iter().any(|m| m["id"] == id && m["lag"] == 0))
    });
    for name in &names {
        assert_resolves_data(&set.members[full], name, &big_value(name).data);
    }
}

#[test]
fn a_member_whose_disk_fails_at_fsync_stops_saying_why() {
    let mut set = Set::empty();
    let backing = set.dir.path().join("backing-3");
    let _disk = match Mounted::thin_ext4(&set.data_dir(3), &backing, "3m", 128 << 20) {
        Ok(disk) => disk,
        Err(reason) => {
            eprintln!("fsync-failure test not run: cannot mount ext4 on a loop device: {reason}");
            return;
        }
    };
    set.form_members(3);
    let failing = 2;
    let (names, said) = write_until_it_stops(&mut set, failing);
    assert!(
        said.contains("stopped on this node"),
        "it did not say why it stopped: {said}"
    );
    assert_resolved_everywhere_but(&set, failing, &names);
}

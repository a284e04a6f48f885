//! A laboratory network for partition tests: one network namespace per member and one
//! for the test's clients (the hub), joined by veth pairs on a bridge in the hub, made
//! and cut with `ip` alone.
//!
//! Member k has the address 10.99.0.k, the hub 10.99.0.100; they exist only inside
//! these namespaces, which have no route out, so nothing leaves the machine and the
//! members' fixed ports can collide with nothing. A link between two members is cut
//! by a blackhole route to the other in each one's namespace: neither can send the
//! other anything (TCP's replies included), while both stay reachable from the hub.
//! (`tc` filters or nftables/iptables would do it too, but these machines have no
//! `nft` or `iptables` and their kernels no `tc` classifiers; routes need nothing.)
//! Every namespace is deleted when the [`Lab`] is dropped.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// The hub's address.
const HUB: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 100);

/// Namespaces for `size` members and a hub.
pub(super) struct Lab {
    prefix: String,
    size: u64,
    cuts: Mutex<BTreeSet<(u64, u64)>>,
}

impl Lab {
    /// Makes the namespaces and links; why not, when this machine does not let it
    /// (no `ip`, not root, namespaces not permitted).
    pub(super) fn new(size: u64) -> Result<Lab, String> {
        static LABS: AtomicUsize = AtomicUsize::new(0);
        let n = LABS.fetch_add(1, Ordering::Relaxed);
        let lab = Lab {
            prefix: format!("hdl-{}-{n}", std::process::id()),
            size,
            cuts: Mutex::default(),
        };
        lab.ip(&["netns", "add", &lab.hub()])?;
        let hub = lab.hub();
        lab.ip(&["-n", &hub, "link", "set", "lo", "up"])?;
        lab.ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        lab.ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        lab.ip(&[
            "-n",
            &hub,
            "addr",
            "add",
            &format!("{HUB}/24"),
            "dev",
            "br0",
        ])?;
        for id in 1..=size {
            lab.add_member(id)?;
        }
        Ok(lab)
    }

    fn add_member(&self, id: u64) -> Result<(), String> {
        let (hub, member, veth) = (self.hub(), self.member(id), format!("v{id}"));
        self.ip(&["netns", "add", &member])?;
        self.ip(&["-n", &member, "link", "set", "lo", "up"])?;
        let pair = ["link", "add", &veth, "type", "veth", "peer", "name", "eth0"];
        self.ip(&[&["-n", &hub][..], &pair, &["netns", &member]].concat())?;
        self.ip(&["-n", &hub, "link", "set", &veth, "master", "br0", "up"])?;
        let address = format!("{}/24", self.address(id));
        self.ip(&["-n", &member, "addr", "add", &address, "dev", "eth0"])?;
        self.ip(&["-n", &member, "link", "set", "eth0", "up"])
    }

    fn hub(&self) -> String {
        format!("{}-hub", self.prefix)
    }

    fn member(&self, id: u64) -> String {
        format!("{}-m{id}", self.prefix)
    }

    /// Member `id`'s address.
    pub(super) fn address(&self, id: u64) -> IpAddr {
        let last = u8::try_from(id).expect("a small member id");
        IpAddr::V4(Ipv4Addr::new(10, 99, 0, last))
    }

    /// Member `id`'s address with `port`, as `hdl serve` takes it.
    pub(super) fn socket(&self, id: u64, port: u16) -> String {
        SocketAddr::new(self.address(id), port).to_string()
    }

    /// The words that run a command inside member `id`'s namespace, or the hub's.
    pub(super) fn exec_in(&self, member: Option<u64>) -> Vec<OsString> {
        let namespace = member.map_or_else(|| self.hub(), |id| self.member(id));
        ["ip", "netns", "exec", &namespace]
            .map(OsString::from)
            .to_vec()
    }

    /// Runs `work` on a thread inside the hub's namespace (its sockets are the hub's).
    pub(super) fn inside<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.hub());
        std::thread::scope(|scope| {
            let thread = scope.spawn(|| {
                let namespace = File::open(&path).expect("the hub's namespace");
                move_into_link_name_space(namespace.as_fd(), Some(LinkNameSpaceType::Network))
                    .expect("enter the hub's namespace");
                work()
            });
            thread.join().expect("the work inside the hub")
        })
    }

    /// Cuts member `id` off every other member (the hub still reaches it).
    pub(super) fn isolate(&self, id: u64) {
        for other in (1..=self.size).filter(|other| *other != id) {
            self.cut(id, other);
        }
    }

    /// Cuts the link between members `a` and `b`, both ways.
    fn cut(&self, a: u64, b: u64) {
        for (from, to) in [(a, b), (b, a)] {
            let inserted = self.cuts().insert((from, to));
            if inserted {
                self.blackhole("add", from, to);
            }
        }
    }

    /// Restores every link cut.
    pub(super) fn heal(&self) {
        let cuts = std::mem::take(&mut *self.cuts());
        for (from, to) in cuts {
            self.blackhole("del", from, to);
        }
    }

    fn cuts(&self) -> std::sync::MutexGuard<'_, BTreeSet<(u64, u64)>> {
        self.cuts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds (`add`) or deletes (`del`) the route in `from`'s namespace that drops
    /// everything it sends to `to`.
    fn blackhole(&self, verb: &str, from: u64, to: u64) {
        let (namespace, target) = (self.member(from), format!("{}/32", self.address(to)));
        let route = ["-n", &namespace, "route", verb, "blackhole", &target];
        self.ip(&route).expect("a blackhole route");
    }

    fn ip(&self, args: &[&str]) -> Result<(), String> {
        let output = Command::new("ip")
            .args(args)
            .output()
            .map_err(|error| format!("cannot run ip: {error}"))?;
        if output.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&output.stderr);
        Err(format!("ip {}: {}", args.join(" "), said.trim()))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for id in 1..=self.size {
            let _ = self.ip(&["netns", "del", &self.member(id)]);
        }
        let _ = self.ip(&["netns", "del", &self.hub()]);
    }
}

//! Partitions of a three-member replica set, each member in a network namespace of its
//! own ([`Lab`]): the primary cut off from the others, then a secondary. A member cut
//! off acknowledges no write (the primary cannot commit alone, a secondary cannot
//! reach the primary), the other two go on taking writes, and once the links heal every
//! member holds every acknowledged write. Where namespaces cannot be made, the test
//! says why on stderr and passes without running.

use hdl::codec::ResponseCode;
use serde_json::Value;

use super::netns::Lab;
use super::{Set, assert_resolves, create};

/// Creates `name` through member `index` from the hub; the response code.
fn create_via(set: &Set, index: usize, name: &str) -> ResponseCode {
    let lab = set.lab.as_ref().expect("a set in a lab");
    lab.inside(|| create(&set.members[index], name))
}

/// Creates `count` handles `test/<label>-N` through member `index`, each of which must
/// be acknowledged; their names are added to `acked`.
fn write_through(set: &Set, index: usize, label: &str, count: usize, acked: &mut Vec<String>) {
    for n in 0..count {
        let name = format!("test/{label}-{n}");
        assert_eq!(
            create_via(set, index, &name),
            ResponseCode::Success,
            "{name}"
        );
        acked.push(name);
    }
}

/// A write through member `index`, cut off from the others, is not acknowledged.
fn refused_while_cut_off(set: &Set, index: usize, name: &str) {
    let answer = create_via(set, index, name);
    assert_ne!(
        answer,
        ResponseCode::Success,
        "node {} acknowledged {name} while cut off from the others",
        set.members[index].id
    );
}

/// Waits until the primary that member `via` knows of sees every member caught up.
fn await_converged(set: &Set, via: usize) {
    set.await_status(via, "every member caught up", |s: &Value| {
        s["members"].as_array().is_some_and(|members| {
            members.len() == 3
                && members
                    .iter()
                    .all(|m| m["lag"] == 0 && m["role"] != "unreachable")
        })
    });
}

#[test]
fn a_cut_off_member_acknowledges_nothing_and_the_healed_set_loses_nothing() {
    let lab = match Lab::new(3) {
        Ok(lab) => lab,
        Err(reason) => {
            eprintln!("partition test not run: cannot make network namespaces here: {reason}");
            return;
        }
    };
    let set = Set::form_in(3, Some(lab));
    let lab = set.lab.as_ref().expect("the lab");
    let mut acked = Vec::new();
    let primary = set.primary(0);
    write_through(&set, primary, "before", 5, &mut acked);

    // The primary alone: it cannot commit; the other two elect a primary of their own.
    let old_primary = set.members[primary].id;
    lab.isolate(old_primary);
    refused_while_cut_off(&set, primary, "test/on-the-cut-off-primary");
    let majority = set.primary_besides((primary + 1) % 3, old_primary);
    write_through(&set, majority, "majority", 10, &mut acked);
    lab.heal();
    await_converged(&set, majority);

    // A secondary alone: it cannot reach the primary; the primary and the other
    // secondary go on.
    let primary = set.primary(majority);
    let secondary = (primary + 1) % 3;
    lab.isolate(set.members[secondary].id);
    refused_while_cut_off(&set, secondary, "test/on-the-cut-off-secondary");
    write_through(&set, primary, "without-a-secondary", 10, &mut acked);
    lab.heal();
    await_converged(&set, primary);

    for member in &set.members {
        lab.inside(|| {
            for name in &acked {
                assert_resolves(member, name);
            }
        });
    }
}

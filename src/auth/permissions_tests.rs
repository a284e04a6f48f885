//! The permission matrix: who is refused with which error, for a few operations.

use std::collections::HashMap;

use super::*;
use crate::values::ValueIndex;
use crate::values::ValueReference;

fn me() -> Identity {
    Identity {
        handle: "10.1000/alice".into(),
        index: 300,
    }
}

fn admin(index: u32, perms: AdminPermissions, handle: &str, admin_index: u32) -> HandleValue {
    let record = AdminRecord {
        permissions: perms,
        admin_handle: handle.into(),
        admin_index,
        legacy_padding: false,
    };
    HandleValue::new(index, "HS_ADMIN", record.encode())
}

fn vlist(index: u32, members: &[(&str, u32)]) -> HandleValue {
    let list = ValueList(
        members
            .iter()
            .map(|(handle, index)| ValueReference {
                handle: (*handle).into(),
                index: ValueIndex(*index),
            })
            .collect(),
    );
    HandleValue::new(index, "HS_VLIST", list.encode())
}

/// The world: a group `10.1000/group:200` holding a nested group
/// `10.1000/inner:200` holding alice; a cycle `10.1000/loop-a` ↔ `10.1000/loop-b`.
fn world() -> HashMap<String, Vec<HandleValue>> {
    HashMap::from([
        (
            "10.1000/group".into(),
            vec![vlist(200, &[("10.1000/bob", 300), ("10.1000/inner", 200)])],
        ),
        (
            "10.1000/inner".into(),
            vec![vlist(200, &[("10.1000/ALICE", 300)])],
        ),
        (
            "10.1000/loop-a".into(),
            vec![vlist(200, &[("10.1000/loop-b", 200)])],
        ),
        (
            "10.1000/loop-b".into(),
            vec![vlist(200, &[("10.1000/loop-a", 200)])],
        ),
    ])
}

/// Runs `authorise` for `me()` with `governing` values on the handle or the prefix,
/// as the operation requires.
fn check(
    operation: Operation,
    governing: &[HandleValue],
    server_admins: &[Identity],
    world: &HashMap<String, Vec<HandleValue>>,
) -> Result<(), AuthzError> {
    let lookup = |handle: &str| world.get(handle).cloned();
    let (target, prefix): (&[HandleValue], &[HandleValue]) = if operation.governed_by_prefix() {
        (&[], governing)
    } else {
        (governing, &[])
    };
    authorise(&me(), operation, target, prefix, server_admins, &lookup)
}

const OPERATIONS: [Operation; 4] = [
    Operation::CreateHandle,
    Operation::AddValue,
    Operation::RemoveAdminValue,
    Operation::ListHandles,
];

fn not_admin(result: Result<(), AuthzError>) -> bool {
    matches!(result, Err(AuthzError::NotAnAdmin { index: 300, .. }))
}

#[test]
fn matrix_of_admins_and_operations() {
    let w = world();
    for op in OPERATIONS {
        let all = AdminPermissions::ALL;
        let lacking = all.without(op.required());
        let direct = |perms| vec![admin(100, perms, "10.1000/alice", 300)];
        assert!(not_admin(check(op, &[], &[], &w)), "{op:?}: no HS_ADMIN");
        let others = vec![admin(100, all, "10.1000/bob", 300)];
        assert!(not_admin(check(op, &others, &[], &w)), "{op:?}: not named");
        assert_eq!(
            check(op, &direct(lacking), &[], &w),
            Err(AuthzError::InsufficientPermissions {
                required: op.required(),
                held: lacking
            }),
            "{op:?}: without the bit"
        );
        assert_eq!(
            check(op, &direct(all), &[], &w),
            Ok(()),
            "{op:?}: with the bit"
        );
        let via_group = vec![admin(100, op.required(), "10.1000/group", 200)];
        assert_eq!(
            check(op, &via_group, &[], &w),
            Ok(()),
            "{op:?}: nested group"
        );
        let group_lacking = vec![admin(100, lacking, "10.1000/group", 200)];
        assert!(matches!(
            check(op, &group_lacking, &[], &w),
            Err(AuthzError::InsufficientPermissions { .. })
        ));
        assert_eq!(check(op, &[], &[me()], &w), Ok(()), "{op:?}: server admin");
        let group_server_admin = Identity {
            handle: "10.1000/group".into(),
            index: 200,
        };
        assert_eq!(check(op, &[], &[group_server_admin], &w), Ok(()));
    }
}

#[test]
fn prefix_admins_govern_creation_and_listing_only() {
    let w = world();
    let lookup = |handle: &str| w.get(handle).cloned();
    let prefix_values = vec![admin(100, AdminPermissions::ALL, "10.1000/alice", 300)];
    for (op, allowed) in [
        (Operation::CreateHandle, true),
        (Operation::ListHandles, true),
        (Operation::AddValue, false),
        (Operation::DeleteHandle, false),
        (Operation::ReadValue, false),
    ] {
        let result = authorise(&me(), op, &[], &prefix_values, &[], &lookup);
        assert_eq!(result.is_ok(), allowed, "{op:?}");
        if !allowed {
            assert!(not_admin(result));
        }
    }
}

#[test]
fn index_zero_means_any_index_and_handles_fold_case() {
    let w = world();
    let any = vec![admin(100, AdminPermissions::ALL, "10.1000/ALICE", 0)];
    assert_eq!(check(Operation::AddValue, &any, &[], &w), Ok(()));
    let other_index = vec![admin(100, AdminPermissions::ALL, "10.1000/alice", 301)];
    assert!(not_admin(check(Operation::AddValue, &other_index, &[], &w)));
}

#[test]
fn the_best_record_wins_and_undecodable_ones_are_skipped() {
    let w = world();
    let values = vec![
        HandleValue::new(99, "HS_ADMIN", vec![1, 2, 3]),
        admin(100, AdminPermissions::READ_VALUE, "10.1000/alice", 300),
        admin(101, AdminPermissions::ADD_VALUE, "10.1000/group", 200),
    ];
    assert_eq!(check(Operation::AddValue, &values, &[], &w), Ok(()));
    assert_eq!(
        check(Operation::DeleteHandle, &values, &[], &w),
        Err(AuthzError::InsufficientPermissions {
            required: AdminPermissions::DELETE_HANDLE,
            held: AdminPermissions::READ_VALUE.with(AdminPermissions::ADD_VALUE),
        })
    );
}

#[test]
fn group_cycles_end() {
    let mut w = world();
    let into_loop = vec![admin(100, AdminPermissions::ALL, "10.1000/loop-a", 200)];
    assert!(not_admin(check(Operation::AddValue, &into_loop, &[], &w)));
    w.insert(
        "10.1000/loop-b".into(),
        vec![vlist(
            200,
            &[("10.1000/loop-a", 200), ("10.1000/alice", 300)],
        )],
    );
    assert_eq!(check(Operation::AddValue, &into_loop, &[], &w), Ok(()));
}

/// A chain of `len` groups `10.1000/g0` → … → `g{len-1}` → alice.
fn chain(len: usize) -> HashMap<String, Vec<HandleValue>> {
    (0..len)
        .map(|i| {
            let next = if i + 1 == len {
                ("10.1000/alice".to_string(), 300)
            } else {
                (format!("10.1000/g{}", i + 1), 200)
            };
            (
                format!("10.1000/g{i}"),
                vec![vlist(200, &[(&next.0, next.1)])],
            )
        })
        .collect()
}

#[test]
fn group_nesting_is_limited() {
    let head = vec![admin(100, AdminPermissions::ALL, "10.1000/g0", 200)];
    let deepest = chain(MAX_GROUP_DEPTH);
    assert_eq!(check(Operation::AddValue, &head, &[], &deepest), Ok(()));
    let too_deep = chain(MAX_GROUP_DEPTH + 1);
    assert!(matches!(
        check(Operation::AddValue, &head, &[], &too_deep),
        Err(AuthzError::GroupTooDeep { limit: MAX_GROUP_DEPTH, handle }) if handle == "10.1000/g8"
    ));
}

#[test]
fn group_lookups_are_limited() {
    let members: Vec<String> = (0..=MAX_GROUP_LOOKUPS)
        .map(|i| format!("10.1000/w{i}"))
        .collect();
    let refs: Vec<(&str, u32)> = members.iter().map(|m| (m.as_str(), 200)).collect();
    let w = HashMap::from([("10.1000/wide".to_string(), vec![vlist(200, &refs)])]);
    let wide = vec![admin(100, AdminPermissions::ALL, "10.1000/wide", 200)];
    assert_eq!(
        check(Operation::AddValue, &wide, &[], &w),
        Err(AuthzError::TooManyGroups {
            limit: MAX_GROUP_LOOKUPS
        })
    );
}

#[test]
fn creation_is_governed_by_the_right_prefix_handle() {
    let handle = |text| Handle::parse(text).unwrap();
    for (target, governing, op) in [
        ("10.1000/x", "0.NA/10.1000", Operation::CreateHandle),
        (
            "cnri.dlib/July95",
            "0.NA/CNRI.DLIB",
            Operation::CreateHandle,
        ),
        ("0.na/10.1000", "0.NA/10", Operation::CreateDerivedPrefix),
        (
            "0.NA/10.1000.7",
            "0.NA/10.1000",
            Operation::CreateDerivedPrefix,
        ),
        ("0.NA/10", "0.NA/0.NA", Operation::CreateHandle),
    ] {
        let built = prefix_admin_handle(&handle(target)).unwrap();
        assert_eq!(built.as_str(), governing, "{target}");
        assert_eq!(Operation::create(&handle(target)), op, "{target}");
    }
}

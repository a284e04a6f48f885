//! One node, assembled: its groups, its service, its edges and its peer port.

pub mod calls;
pub mod groups;

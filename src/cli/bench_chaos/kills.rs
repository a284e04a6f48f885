//! The kill loop of a chaos run: every 1–3 s (by default) a blow to the set, drawn
//! from the run's seed — a random member SIGKILLed, or two at once (the set loses
//! its quorum), or the primary, sometimes the primary again in the next round (the
//! member that took over) — and the killed members started again on their data after
//! a random down time of a quarter to a half of the round.
//!
//! Only the children of the set are signalled, by [`LocalSet::kill`], which reaps them.

use std::time::Duration;

use rand::RngExt;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use tokio::time::Instant;

use super::workload::Members;
use crate::cli::local_set::LocalSet;

/// The rounds' length is drawn from `min..=max`.
#[derive(Debug, Clone, Copy)]
pub struct Rounds {
    /// The shortest round.
    pub min: Duration,
    /// The longest round.
    pub max: Duration,
}

/// What the kill loop did.
#[derive(Debug, Default)]
pub struct KillTally {
    /// SIGKILLs sent, in all.
    pub kills: u64,
    /// Rounds that killed one member, not chosen as the primary.
    pub single: u64,
    /// Rounds that killed two members at once.
    pub double: u64,
    /// Rounds that killed the primary.
    pub primary: u64,
    /// Of those, rounds right after a round that killed the primary.
    pub primary_again: u64,
}

/// One round's blow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blow {
    /// A member at random.
    One,
    /// Two members at once.
    Two,
    /// The primary.
    Primary,
}

/// Kills and restarts members of `set` until `deadline`; every killed member is
/// running again when this returns `Ok`.
pub async fn kill_until(
    set: &mut LocalSet,
    members: &Members,
    rounds: Rounds,
    mut rng: StdRng,
    deadline: Instant,
) -> anyhow::Result<KillTally> {
    let started = Instant::now();
    let mut tally = KillTally::default();
    let mut primary_next = false;
    while Instant::now() < deadline {
        let round_start = Instant::now();
        let length = rng.random_range(rounds.min..=rounds.max);
        let blow = if primary_next {
            tally.primary_again += 1;
            Blow::Primary
        } else {
            draw(&mut rng)
        };
        primary_next = blow == Blow::Primary && rng.random_ratio(1, 2);
        let victims = victims(set, blow, &mut rng).await?;
        for &index in &victims {
            members.set_up(index, false);
            set.kill(index).await?;
        }
        tally.count(blow, victims.len());
        let down = rng.random_range(length / 4..=length / 2);
        tokio::time::sleep(down).await;
        for &index in &victims {
            set.start(index).await?;
            members.set_up(index, true);
        }
        let ids: Vec<String> = victims
            .iter()
            .map(|index| set.nodes[*index].plan.id.to_string())
            .collect();
        println!(
            "kill {:>5} at {:>7.1} s: {} node {}, down {} ms",
            tally.kills,
            started.elapsed().as_secs_f64(),
            blow.describe(),
            ids.join(" and "),
            down.as_millis()
        );
        tokio::time::sleep_until(round_start + length).await;
    }
    Ok(tally)
}

/// One member in six rounds is two, one in four the primary, the others one at random.
fn draw(rng: &mut StdRng) -> Blow {
    match rng.random_range(0..12) {
        0..=1 => Blow::Two,
        2..=4 => Blow::Primary,
        _ => Blow::One,
    }
}

/// The indexes of the members `blow` kills.
async fn victims(set: &LocalSet, blow: Blow, rng: &mut StdRng) -> anyhow::Result<Vec<usize>> {
    let count = set.nodes.len();
    Ok(match blow {
        Blow::One => vec![rng.random_range(0..count)],
        Blow::Two => sample(rng, count, 2.min(count)).into_vec(),
        Blow::Primary => vec![set.index_of(set.primary_id().await?)?],
    })
}

impl Blow {
    fn describe(self) -> &'static str {
        match self {
            Blow::One => "one member,",
            Blow::Two => "two members,",
            Blow::Primary => "the primary,",
        }
    }
}

impl KillTally {
    fn count(&mut self, blow: Blow, killed: usize) {
        self.kills += killed as u64;
        match blow {
            Blow::One => self.single += 1,
            Blow::Two => self.double += 1,
            Blow::Primary => self.primary += 1,
        }
    }
}

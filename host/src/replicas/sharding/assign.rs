//! How many slots each member of a shard group should hold, and which ones it gives up or takes
//! up, so that loads stay balanced to one slot and a change of members moves as few slots as
//! can be: only what the members over their share give up, or a departed member held.
//!
//! Each member's share, its *target*, is `SLOTS / n` (the remainder going to the members whose
//! identities sort first). A member holding more than its target gives up the slots it likes
//! least; a member holding fewer takes up free slots (claimed by no live member) that it likes
//! best, but only those it likes best among the members still short of their targets, so two
//! members never reach for the same slot while they see the group alike. "Likes" is a
//! pseudo-random score per (member, slot), as in rendezvous hashing.
//!
//! Unlike a stateless assignment (rendezvous or Maglev hashing computed from the member list
//! alone), this starts from what the members hold now, so a join moves exactly the joiner's
//! share and a departure exactly the departed member's slots. Written here: no crate balances a
//! fixed set of slots from the current holdings.

use std::collections::BTreeMap;

use super::{SLOTS, SlotSet};

/// How much `member` likes `slot`: a well-mixed 64-bit score of the member's identity hash and
/// the slot (splitmix64's finalizer: FNV-1a alone spreads a short suffix poorly).
pub fn score(member: &str, slot: usize) -> u64 {
    let mut z =
        wasmctrl_core::shard::hash(member) ^ (slot as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Each member's share of the slots, by identity.
pub fn targets<'a>(members: impl IntoIterator<Item = &'a str>) -> BTreeMap<&'a str, usize> {
    let mut sorted: Vec<&str> = members.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let n = sorted.len().max(1);
    (sorted.into_iter().enumerate())
        .map(|(rank, m)| (m, SLOTS / n + usize::from(rank < SLOTS % n)))
        .collect()
}

/// The slots `member` should give up when it holds more than `target`: as many as it holds
/// beyond it, carrying as near as can be its proportional share of the keys (`keys[slot]` in
/// each slot it holds), so that what a joiner takes is its share of the keys, not just of the
/// slots. Starts from its least liked slots and swaps while that brings the keys given up
/// nearer the share.
pub fn surplus(member: &str, held: &SlotSet, target: usize, keys: &[usize; SLOTS]) -> SlotSet {
    let mut slots: Vec<usize> = held.iter().collect();
    let excess = slots.len().saturating_sub(target);
    if excess == 0 {
        return SlotSet::default();
    }
    slots.sort_unstable_by_key(|&s| (score(member, s), s));
    let total: usize = slots.iter().map(|&s| keys[s]).sum();
    // In the same proportion as the slots.
    let share = (total * excess) as f64 / slots.len() as f64;
    let (mut give, mut keep) = (slots[..excess].to_vec(), slots[excess..].to_vec());
    let mut given: usize = give.iter().map(|&s| keys[s]).sum();
    // Each swap must bring the keys given up strictly nearer the share, so this ends; the
    // bound only caps the work on a large group.
    for _ in 0..4 * SLOTS {
        let off = given as f64 - share;
        let best = (give.iter().enumerate())
            .flat_map(|(i, &g)| keep.iter().enumerate().map(move |(j, &k)| (i, j, g, k)))
            .map(|(i, j, g, k)| {
                let after = off - keys[g] as f64 + keys[k] as f64;
                (after.abs(), i, j)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        match best {
            Some((after, i, j)) if after + 0.5 < off.abs() => {
                std::mem::swap(&mut give[i], &mut keep[j]);
                given = given - keys[keep[j]] + keys[give[i]];
            }
            _ => break,
        }
    }
    let mut out = SlotSet::default();
    give.into_iter().for_each(|s| out.insert(s));
    out
}

/// The free slots `member` should take up, at most `need`: its best liked among those it
/// likes best of all the members in `short` (the live members below their targets, itself
/// among them).
pub fn claimable(member: &str, short: &[&str], free: &SlotSet, need: usize) -> SlotSet {
    let mut mine: Vec<(u64, usize)> = free
        .iter()
        .map(|s| (score(member, s), s))
        .filter(|&(own, s)| {
            (short.iter())
                .filter(|other| **other != member)
                .all(|other| (score(other, s), *other) < (own, member))
        })
        .collect();
    mine.sort_unstable_by(|a, b| b.cmp(a));
    let mut out = SlotSet::default();
    mine.into_iter().take(need).for_each(|(_, s)| out.insert(s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identities(n: usize, seed: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("wasmctrl-{seed}-{i}_{:08x}", (seed * 7919 + i * 104_729)))
            .collect()
    }

    /// What the members hold once they have given up and taken up slots, in rounds, as the
    /// member task does, starting from `held` (absent members hold nothing).
    fn settle(
        members: &[String],
        mut held: BTreeMap<String, SlotSet>,
        keys: &[usize; SLOTS],
    ) -> BTreeMap<String, SlotSet> {
        held.retain(|m, _| members.contains(m));
        for m in members {
            held.entry(m.clone()).or_default();
        }
        let targets = targets(members.iter().map(String::as_str));
        for _ in 0..10 {
            let before = held.clone();
            for m in members {
                let give = surplus(m, &held[m], targets[m.as_str()], keys);
                let kept = held[m].difference(&give);
                held.insert(m.clone(), kept);
            }
            let claimed = held.values().fold(SlotSet::default(), |a, s| a.union(s));
            let free = SlotSet::all().difference(&claimed);
            let short: Vec<&str> = (members.iter())
                .filter(|m| held[*m].len() < targets[m.as_str()])
                .map(String::as_str)
                .collect();
            let mut taken = Vec::new();
            for m in &short {
                let need = targets[m] - held[*m].len();
                taken.push((m.to_string(), claimable(m, &short, &free, need)));
            }
            for (m, t) in taken {
                for (other, slots) in &held {
                    assert!(
                        other == &m || slots.intersection(&t).is_empty(),
                        "taken twice"
                    );
                }
                let now = held[&m].union(&t);
                held.insert(m, now);
            }
            if held == before {
                break;
            }
        }
        held
    }

    fn moved(a: &BTreeMap<String, SlotSet>, b: &BTreeMap<String, SlotSet>) -> usize {
        (0..SLOTS)
            .filter(|&s| {
                let owner = |h: &BTreeMap<String, SlotSet>| {
                    h.iter()
                        .find(|(_, set)| set.contains(s))
                        .map(|(m, _)| m.clone())
                };
                owner(a) != owner(b)
            })
            .count()
    }

    fn assert_balanced(held: &BTreeMap<String, SlotSet>) {
        let all = held.values().fold(SlotSet::default(), |a, s| {
            assert!(a.intersection(s).is_empty(), "a slot held twice");
            a.union(s)
        });
        assert_eq!(all.len(), SLOTS, "every slot held");
        let lens: Vec<usize> = held.values().map(SlotSet::len).collect();
        let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
        assert!(hi - lo <= 1, "{lens:?}");
    }

    #[test]
    fn targets_share_the_slots_to_one() {
        for n in 1..=20 {
            let names = identities(n, n);
            let t = targets(names.iter().map(String::as_str));
            assert_eq!(t.values().sum::<usize>(), SLOTS);
            assert!(t.values().max().unwrap() - t.values().min().unwrap() <= 1);
        }
        assert_eq!(targets(["a", "a"]).len(), 1, "a duplicate counts once");
    }

    /// Keys in each slot as 3,000 objects with random uids would put them.
    fn keys_per_slot(seed: usize) -> [usize; SLOTS] {
        let mut keys = [0; SLOTS];
        for i in 0..3000u64 {
            let uid = format!("{seed:08x}-{i:04x}-4a5b-8c9d-{:012x}", i * 2_654_435_761);
            keys[super::super::slot_of(wasmctrl_core::shard::hash(&uid))] += 1;
        }
        keys
    }

    fn keys_of(held: &SlotSet, keys: &[usize; SLOTS]) -> usize {
        held.iter().map(|s| keys[s]).sum()
    }

    #[test]
    fn joins_and_departures_move_exactly_the_share_that_must_move() {
        let mut worst: f64 = 0.0;
        for seed in 0..50 {
            let keys = keys_per_slot(seed);
            let total: usize = keys.iter().sum();
            let all = identities(5, 100 + seed);
            // One member after another joins; each join moves the joiner's share only: its
            // share of the slots, carrying its share of the keys.
            let mut held = settle(&all[..1], BTreeMap::new(), &keys);
            assert_balanced(&held);
            for n in 2..=5 {
                let next = settle(&all[..n], held.clone(), &keys);
                assert_balanced(&next);
                let share = next[&all[n - 1]].len();
                assert_eq!(moved(&held, &next), share, "{n} members");
                let taken = keys_of(&next[&all[n - 1]], &keys) as f64 / total as f64;
                worst = worst.max((taken - 1.0 / n as f64).abs());
                held = next;
            }
            // One leaves (or dies): only its slots move.
            let gone = all[seed % 5].clone();
            let rest: Vec<String> = all.iter().filter(|m| **m != gone).cloned().collect();
            let next = settle(&rest, held.clone(), &keys);
            assert_balanced(&next);
            assert_eq!(moved(&held, &next), held[&gone].len());
        }
        println!(
            "a joiner's keys were at most {:.2}% off its share",
            worst * 100.0
        );
        assert!(worst < 0.01, "{worst}");
    }

    #[test]
    fn members_short_of_their_share_never_reach_for_the_same_slot() {
        let names = identities(4, 7);
        let short: Vec<&str> = names.iter().map(String::as_str).collect();
        let picks: Vec<SlotSet> = (short.iter())
            .map(|m| claimable(m, &short, &SlotSet::all(), SLOTS))
            .collect();
        let union = picks.iter().fold(SlotSet::default(), |a, s| {
            assert!(a.intersection(s).is_empty());
            a.union(s)
        });
        assert_eq!(union.len(), SLOTS, "every free slot is someone's best");
        let held = SlotSet::parse("0-9").unwrap();
        let give = surplus(short[0], &held, 7, &[1; SLOTS]);
        assert_eq!(give.len(), 3);
        assert!(give.difference(&held).is_empty());
    }
}

//! Which member of a shard group owns which slots, from the members' identities alone, so that
//! every replica computes the same answer without talking to the others.
//!
//! Rendezvous (highest-random-weight) hashing with bounded loads: every (slot, member) pair has
//! a pseudo-random score; pairs are taken from the highest score down, and a slot goes to the
//! first member to reach for it that still has room. Each member's room is its even share,
//! `SLOTS / n` (the remainder going to the members whose identities sort first), so loads are
//! balanced to one slot. A member joining or leaving moves about its own share: the pairs that
//! do not involve it keep their order, so most slots land where they did (the tests measure
//! it). Written here: the crates for rendezvous or Maglev hashing balance keys, not a fixed set
//! of slots with capacities.

use super::{SLOTS, SlotSet};

/// A well-mixed 64-bit score of a member's identity hash and a slot (splitmix64's finalizer:
/// FNV-1a alone spreads a short suffix poorly).
fn score(member: u64, slot: usize) -> u64 {
    let mut z = member ^ (slot as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The slots of each member, in the order of `members` (identities; duplicates count once).
pub fn assign(members: &[String]) -> Vec<SlotSet> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|a, b| members[*a].cmp(&members[*b]));
    order.dedup_by(|a, b| members[*a] == members[*b]);
    let mut owned = vec![SlotSet::default(); members.len()];
    let n = order.len();
    if n == 0 {
        return owned;
    }
    let mut room = vec![0usize; members.len()];
    for (rank, &m) in order.iter().enumerate() {
        room[m] = SLOTS / n + usize::from(rank < SLOTS % n);
    }
    let hashes: Vec<u64> = members
        .iter()
        .map(|m| wasmctrl_scope::shard::hash(m))
        .collect();
    let mut pairs: Vec<(u64, usize, usize)> = (0..SLOTS)
        .flat_map(|slot| order.iter().map(move |&m| (slot, m)))
        .map(|(slot, m)| (score(hashes[m], slot), slot, m))
        .collect();
    // Highest score first; ties (vanishingly rare) by slot, then member index, to stay total.
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut taken = SlotSet::default();
    for (_, slot, m) in pairs {
        if room[m] > 0 && !taken.contains(slot) {
            taken.insert(slot);
            owned[m].insert(slot);
            room[m] -= 1;
        }
    }
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize, seed: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("wasmctrl-{seed}-{i}_{:08x}", (seed * 7919 + i * 104_729)))
            .collect()
    }

    /// Fraction of slots whose owner changed between two assignments, by identity.
    fn moved(before: &[String], a: &[SlotSet], after: &[String], b: &[SlotSet]) -> f64 {
        let owner = |names: &[String], sets: &[SlotSet], slot| {
            names
                .iter()
                .zip(sets)
                .find(|(_, s)| s.contains(slot))
                .map(|(n, _)| n.clone())
        };
        let changed = (0..SLOTS)
            .filter(|&s| owner(before, a, s) != owner(after, b, s))
            .count();
        changed as f64 / SLOTS as f64
    }

    #[test]
    fn every_slot_has_one_owner_and_loads_differ_by_one_at_most() {
        for n in 1..=20 {
            let names = members(n, n);
            let sets = assign(&names);
            let mut all = SlotSet::default();
            for s in &sets {
                assert!(all.intersection(s).is_empty(), "a slot owned twice");
                all = all.union(s);
            }
            assert_eq!(all.len(), SLOTS, "{n} members");
            let (lo, hi) = (
                sets.iter().map(SlotSet::len).min().unwrap(),
                sets.iter().map(SlotSet::len).max().unwrap(),
            );
            assert!(hi - lo <= 1, "{n} members: {lo}..{hi}");
        }
        assert!(assign(&[]).is_empty());
        let twice = assign(&["a".into(), "a".into()]);
        assert_eq!(
            twice[0].len() + twice[1].len(),
            SLOTS,
            "a duplicate counts once"
        );
    }

    #[test]
    fn the_same_members_in_any_order_get_the_same_slots() {
        let names = members(5, 1);
        let sets = assign(&names);
        let mut reversed = names.clone();
        reversed.reverse();
        let mut back = assign(&reversed);
        back.reverse();
        assert_eq!(sets, back);
    }

    #[test]
    fn a_join_or_a_leave_moves_about_one_share() {
        // Over many groups, as identities are random: the mean and the worst case.
        for n in [2usize, 3, 4, 8] {
            let (mut sum, mut worst) = (0.0, 0.0f64);
            let groups = 200;
            for seed in 0..groups {
                let all = members(n + 1, 1000 + seed);
                let before = &all[..n];
                let a = assign(before);
                let b = assign(&all);
                let m = moved(before, &a, &all, &b);
                sum += m;
                worst = worst.max(m);
                // A leave is the same change backwards.
                assert!((moved(&all, &b, before, &a) - m).abs() < 1e-9);
            }
            let share = 1.0 / (n + 1) as f64;
            let mean = sum / groups as f64;
            println!(
                "{n} -> {}: moved mean {mean:.3}, worst {worst:.3}, share {share:.3}",
                n + 1
            );
            assert!(mean <= share + 0.05, "{n} -> {}: mean {mean}", n + 1);
            assert!(worst <= share + 0.10, "{n} -> {}: worst {worst}", n + 1);
        }
    }
}

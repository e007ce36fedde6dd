//! Completion indexes of Indexed Jobs (kube's `indexed_job_utils.go`): a Pod's index, the
//! `status.completedIndexes` intervals (`1,3-5`), the indexes still to run and the duplicate
//! Pods of an index.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::json::str_at;

/// The annotation (and label) carrying a Pod's completion index.
pub(super) const KEY: &str = "batch.kubernetes.io/job-completion-index";

/// The environment variable a Pod of an Indexed Job reads its index from.
pub(super) const ENV: &str = "JOB_COMPLETION_INDEX";

/// A Pod's completion index, if it has a valid one (kube's `getCompletionIndex`).
pub(super) fn of(pod: &Value) -> Option<usize> {
    let v = pod.pointer("/metadata/annotations")?.get(KEY)?.as_str()?;
    v.parse::<i64>().ok().and_then(|i| usize::try_from(i).ok())
}

/// The `generateName` of a Pod for `index` (`podGenerateNameWithIndex`): `<job>-<index>-`,
/// the Job's name cut so a generated name stays within 63 characters.
pub(super) fn generate_name(job: &str, index: usize) -> String {
    const MAX_PREFIX: usize = 63 - 5;
    let suffix = format!("-{index}-");
    let keep = job.len().min(MAX_PREFIX.saturating_sub(suffix.len()));
    format!("{}{suffix}", &job[..keep])
}

/// Sorted, disjoint, non-adjacent intervals of indexes (kube's `orderedIntervals`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Intervals(Vec<(usize, usize)>);

impl Intervals {
    /// `completedIndexes` as written, indexes at or past `completions` dropped, malformed
    /// parts skipped (`parseIndexesFromString`).
    pub(super) fn parse(s: &str, completions: usize) -> Self {
        let mut out: Vec<(usize, usize)> = Vec::new();
        if s.is_empty() {
            return Self(out);
        }
        for part in s.split(',') {
            let mut limits = part.split('-');
            let Some(first) = limits.next().and_then(|f| f.parse::<usize>().ok()) else {
                continue;
            };
            if first >= completions {
                break;
            }
            let last = match limits.next() {
                Some(l) => match l.parse::<usize>() {
                    Ok(l) => l.min(completions - 1),
                    Err(_) => continue,
                },
                None => first,
            };
            match out.last_mut() {
                Some(prev) if prev.1 + 1 == first => prev.1 = last,
                _ => out.push((first, last)),
            }
        }
        Self(out)
    }

    /// These intervals with `indexes` (in increasing order) added.
    pub(super) fn with(&self, indexes: &[usize]) -> Self {
        let added = Self(indexes.iter().map(|&i| (i, i)).collect());
        self.merge(&added)
    }

    /// The union of two lists of intervals.
    pub(super) fn merge(&self, other: &Self) -> Self {
        let mut all: Vec<(usize, usize)> = self.0.iter().chain(&other.0).copied().collect();
        all.sort_unstable();
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (first, last) in all {
            match out.last_mut() {
                Some(prev) if first <= prev.1 + 1 => prev.1 = prev.1.max(last),
                _ => out.push((first, last)),
            }
        }
        Self(out)
    }

    /// How many indexes there are.
    pub(super) fn total(&self) -> usize {
        self.0.iter().map(|(f, l)| l - f + 1).sum()
    }

    pub(super) fn has(&self, index: usize) -> bool {
        self.0.iter().any(|&(f, l)| f <= index && index <= l)
    }

    /// The first `count` indexes below `completions` not in these intervals
    /// (`firstPendingIndexes`, given the succeeded and running indexes).
    pub(super) fn first_missing(&self, count: usize, completions: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(count);
        let mut candidate = 0;
        for &(first, last) in &self.0 {
            while candidate < completions && out.len() < count && candidate < first {
                out.push(candidate);
                candidate += 1;
            }
            candidate = candidate.max(last + 1);
        }
        while candidate < completions && out.len() < count {
            out.push(candidate);
            candidate += 1;
        }
        out
    }
}

/// As `completedIndexes` is written: two adjacent indexes as a list, longer runs as a range.
impl fmt::Display for Intervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(first, last)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{first}")?;
            if last == first + 1 {
                write!(f, ",{last}")?;
            } else if last > first {
                write!(f, "-{last}")?;
            }
        }
        Ok(())
    }
}

/// Splits active Pods into those to delete (no valid index, an index at or past
/// `completions`, or all but one Pod of an index) and the rest
/// (`appendDuplicatedIndexPodsForRemoval`); of an index's Pods, the one kept is the one
/// furthest along (the last in `deletion_order`).
pub(super) fn duplicates(
    pods: &[Arc<Value>],
    completions: usize,
    deletion_order: impl Fn(&mut [Arc<Value>]),
) -> (Vec<Arc<Value>>, Vec<Arc<Value>>) {
    let (mut rm, mut left) = (Vec::new(), Vec::new());
    let mut by_index: std::collections::BTreeMap<usize, Vec<Arc<Value>>> = Default::default();
    for p in pods {
        match of(p) {
            Some(i) if i < completions => by_index.entry(i).or_default().push(p.clone()),
            _ => rm.push(p.clone()),
        }
    }
    for (_, mut same) in by_index {
        deletion_order(&mut same);
        if let Some(kept) = same.pop() {
            left.push(kept);
        }
        rm.extend(same);
    }
    (rm, left)
}

/// The indexes of `pods`.
pub(super) fn indexes<'a>(pods: impl IntoIterator<Item = &'a Arc<Value>>) -> Vec<usize> {
    let mut out: Vec<usize> = pods.into_iter().filter_map(|p| of(p)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Orders Pods by completion index (those without one first), as kube sorts them before
/// counting succeeded indexes.
pub(super) fn sort(pods: &mut [Arc<Value>]) {
    pods.sort_by_key(|p| (of(p), str_at(p, "/metadata/name").to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_read_and_write_as_kube_s() {
        let parsed = Intervals::parse("0,2-4,7,9-12", 11);
        assert_eq!(parsed.to_string(), "0,2-4,7,9,10");
        assert_eq!(parsed.total(), 7);
        assert!(parsed.has(3) && !parsed.has(5));
        assert_eq!(parsed.with(&[1, 5, 6]).to_string(), "0-7,9,10");
        assert_eq!(Intervals::parse("x,1", 3).to_string(), "1");
        assert_eq!(
            Intervals::parse("1,3", 6).first_missing(3, 6),
            vec![0, 2, 4]
        );
        assert_eq!(Intervals::default().first_missing(5, 2), vec![0, 1]);
        assert_eq!(generate_name("pi", 3), "pi-3-");
        let long = "j".repeat(60);
        assert_eq!(generate_name(&long, 12).len(), 58);
    }
}

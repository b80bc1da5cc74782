//! Length-bucketed batching: which sentences run through the model together.
//!
//! Input: the id count of every pending sentence. Output: batches of indices. Sentences are sorted by
//! length and cut into buckets at fixed edges, so a batch never mixes a short sentence with a long
//! one (padding is wasted work); a batch is further bounded by a token budget (batch × longest).

/// Upper bounds of the length buckets, in phoneme ids.
pub const DEFAULT_EDGES: &[usize] = &[48, 96, 144, 208, 288, 400, 560];

#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Most padded ids (items × longest item) in one model call.
    pub token_budget: usize,
    pub max_items: usize,
}

impl BatchLimits {
    /// One sentence per model call: the baseline the benchmark compares against.
    pub const SINGLE: BatchLimits = BatchLimits {
        token_budget: 0,
        max_items: 1,
    };
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            token_budget: 2400,
            max_items: 16,
        }
    }
}

/// Groups item indices into batches; every index appears exactly once.
pub fn plan(lengths: &[usize], edges: &[usize], limits: BatchLimits) -> Vec<Vec<usize>> {
    let bucket_of = |len: usize| edges.iter().position(|&e| len <= e).unwrap_or(edges.len());
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| (bucket_of(lengths[i]), lengths[i], i));
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in order {
        if let Some(&first) = current.first() {
            let longest = lengths[i].max(lengths[*current.last().unwrap_or(&first)]);
            let fits = current.len() < limits.max_items
                && (current.len() + 1) * longest <= limits.token_budget
                && bucket_of(lengths[first]) == bucket_of(lengths[i]);
            if !fits {
                batches.push(std::mem::take(&mut current));
            }
        }
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// Share of padded id slots that carry no real id, over all batches (0 = none wasted).
pub fn padding_waste(lengths: &[usize], batches: &[Vec<usize>]) -> f64 {
    let (mut real, mut padded) = (0usize, 0usize);
    for b in batches {
        let longest = b.iter().map(|&i| lengths[i]).max().unwrap_or(0);
        real += b.iter().map(|&i| lengths[i]).sum::<usize>();
        padded += longest * b.len();
    }
    if padded == 0 {
        0.0
    } else {
        1.0 - real as f64 / padded as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(batches: &[Vec<usize>], n: usize) -> bool {
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort_unstable();
        seen == (0..n).collect::<Vec<_>>()
    }

    #[test]
    fn every_item_once_and_buckets_not_mixed() {
        let lengths = [10, 300, 40, 45, 20, 290, 100, 12];
        let b = plan(&lengths, DEFAULT_EDGES, BatchLimits::default());
        assert!(covered(&b, lengths.len()));
        for batch in &b {
            let bucket = |l: usize| DEFAULT_EDGES.iter().position(|&e| l <= e);
            assert!(
                batch
                    .iter()
                    .all(|&i| bucket(lengths[i]) == bucket(lengths[batch[0]]))
            );
        }
    }

    #[test]
    fn token_budget_bounds_a_batch() {
        let lengths = vec![100; 50];
        let limits = BatchLimits {
            token_budget: 1000,
            max_items: 64,
        };
        let b = plan(&lengths, DEFAULT_EDGES, limits);
        assert!(b.iter().all(|x| x.len() * 100 <= 1000));
        assert!(covered(&b, 50));
    }

    #[test]
    fn single_limits_give_one_item_per_batch() {
        let b = plan(&[5, 6, 7], DEFAULT_EDGES, BatchLimits::SINGLE);
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn oversized_item_still_runs_alone() {
        let b = plan(&[5000, 10], DEFAULT_EDGES, BatchLimits::default());
        assert!(covered(&b, 2));
        assert!(b.iter().any(|x| x == &vec![0]));
    }

    #[test]
    fn waste_is_zero_for_equal_lengths_and_positive_otherwise() {
        assert_eq!(padding_waste(&[10, 10], &[vec![0, 1]]), 0.0);
        let w = padding_waste(&[10, 30], &[vec![0, 1]]);
        assert!((w - (1.0 - 40.0 / 60.0)).abs() < 1e-12);
        assert_eq!(padding_waste(&[], &[]), 0.0);
    }
}

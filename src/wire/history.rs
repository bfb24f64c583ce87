//! Replay protection: a bounded memory of the signatures (their decoded HMAC
//! tags, so every spelling of one tag counts once) already accepted.
//!
//! jupyter_client rejects a message whose signature it has seen before
//! ("Duplicate Signature"); so does mahtab. The memory is bounded so that a
//! long-lived kernel does not grow without limit: the oldest signatures are
//! forgotten first.

use std::collections::{HashSet, VecDeque};

use bytes::Bytes;

/// How many signatures are remembered (jupyter_client keeps 2^16 as well).
pub const DEFAULT_CAPACITY: usize = 1 << 16;

#[derive(Debug)]
pub struct DigestHistory {
    seen: HashSet<Bytes>,
    order: VecDeque<Bytes>,
    capacity: usize,
}

impl Default for DigestHistory {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl DigestHistory {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            seen: HashSet::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Records `digest`; returns false if it was already recorded (a replay).
    pub fn insert(&mut self, digest: Bytes) -> bool {
        if self.seen.contains(&digest) {
            return false;
        }
        if self.order.len() == self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        self.seen.insert(digest.clone());
        self.order.push_back(digest);
        true
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_repeats_and_forgets_the_oldest() {
        let mut history = DigestHistory::with_capacity(2);
        assert!(history.insert(Bytes::from_static(b"a")));
        assert!(!history.insert(Bytes::from_static(b"a")));
        assert!(history.insert(Bytes::from_static(b"b")));
        assert!(history.insert(Bytes::from_static(b"c")));
        assert_eq!(history.len(), 2);
        // "a" was evicted, so it is accepted again; "c" is still remembered.
        assert!(history.insert(Bytes::from_static(b"a")));
        assert!(!history.insert(Bytes::from_static(b"c")));
    }
}

//! The disk tier's only in-memory state: which objects exist, the generation of their body file,
//! their sizes, and their recency, in about 70 bytes per object (a 44-byte node in one `Vec`, a
//! 20-byte map slot) instead of a heap node per object. The list is doubly linked by `u32`
//! indices into the `Vec`, most recent first; a removal moves the last node into the hole so the
//! `Vec` stays dense with no free list.

use std::collections::HashMap;

use super::format::disk_bytes;
use crate::storage::ObjectId;
use crate::storage::id_hash::BuildIdHasher;

/// What the index knows of one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// Names the body file (`<id>-<generation>.b`); a new body for the same id gets a new one.
    pub(super) generation: u64,
    pub(super) body_len: u64,
    pub(super) meta_len: u32,
    /// Counts meta updates in this run (not persisted; it fills the padding after `meta_len`),
    /// so the tiered storage can tell a meta it read earlier from the current one.
    pub(super) meta_version: u32,
}

impl Entry {
    pub(super) fn bytes(&self) -> u64 {
        disk_bytes(u64::from(self.meta_len), self.body_len)
    }
}

const NIL: u32 = u32::MAX;

struct Node {
    id: ObjectId,
    entry: Entry,
    /// Towards the most recent.
    prev: u32,
    /// Towards the least recent.
    next: u32,
}

pub(super) struct Lru {
    map: HashMap<ObjectId, u32, BuildIdHasher>,
    nodes: Vec<Node>,
    head: u32,
    tail: u32,
    bytes: u64,
}

impl Lru {
    pub(super) fn new() -> Self {
        Lru {
            map: HashMap::with_hasher(BuildIdHasher),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            bytes: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(super) fn get(&self, id: ObjectId) -> Option<Entry> {
        self.map.get(&id).map(|&at| self.nodes[at as usize].entry)
    }

    /// The entry, now the most recent.
    pub(super) fn touch(&mut self, id: ObjectId) -> Option<Entry> {
        let at = *self.map.get(&id)?;
        self.unlink(at);
        self.link_front(at);
        Some(self.nodes[at as usize].entry)
    }

    /// Inserts or replaces `id` as the most recent; returns the entry it replaced.
    pub(super) fn insert(&mut self, id: ObjectId, entry: Entry) -> Option<Entry> {
        self.bytes += entry.bytes();
        if let Some(&at) = self.map.get(&id) {
            let old = std::mem::replace(&mut self.nodes[at as usize].entry, entry);
            self.bytes -= old.bytes();
            self.unlink(at);
            self.link_front(at);
            return Some(old);
        }
        // u32 indices reach 4 billion objects, hundreds of GB of index: never in practice, but
        // the cast below must not wrap, so the oldest makes room (its files stay until restart).
        if self.nodes.len() >= NIL as usize {
            let _ = self.pop_oldest(Some(id));
        }
        let at = self.nodes.len() as u32;
        self.nodes.push(Node {
            id,
            entry,
            prev: NIL,
            next: NIL,
        });
        self.map.insert(id, at);
        self.link_front(at);
        None
    }

    pub(super) fn remove(&mut self, id: ObjectId) -> Option<Entry> {
        let at = self.map.remove(&id)?;
        Some(self.remove_at(at))
    }

    /// Pops least recent objects, never `keep`, until the total is within `budget`.
    pub(super) fn evict_to(
        &mut self,
        budget: u64,
        keep: Option<ObjectId>,
    ) -> Vec<(ObjectId, Entry)> {
        let mut evicted = Vec::new();
        while self.bytes > budget {
            match self.pop_oldest(keep) {
                Some(victim) => evicted.push(victim),
                None => break,
            }
        }
        evicted
    }

    /// Every id, least recent first (the order start-up re-inserts in).
    pub(super) fn ids(&self) -> Vec<ObjectId> {
        let mut ids = Vec::with_capacity(self.nodes.len());
        let mut at = self.tail;
        while at != NIL {
            let node = &self.nodes[at as usize];
            ids.push(node.id);
            at = node.prev;
        }
        ids
    }

    fn pop_oldest(&mut self, keep: Option<ObjectId>) -> Option<(ObjectId, Entry)> {
        let mut at = self.tail;
        while at != NIL && Some(self.nodes[at as usize].id) == keep {
            at = self.nodes[at as usize].prev;
        }
        if at == NIL {
            return None;
        }
        let id = self.nodes[at as usize].id;
        self.map.remove(&id);
        Some((id, self.remove_at(at)))
    }

    /// Removes the node at `at` (already out of the map) and fills the hole with the last node.
    fn remove_at(&mut self, at: u32) -> Entry {
        self.unlink(at);
        let node = self.nodes.swap_remove(at as usize);
        self.bytes -= node.entry.bytes();
        if (at as usize) < self.nodes.len() {
            let (prev, next, id) = {
                let moved = &self.nodes[at as usize];
                (moved.prev, moved.next, moved.id)
            };
            self.relink(prev, next, at);
            self.map.insert(id, at);
        }
        node.entry
    }

    /// Points the neighbours of a node that moved to `to` at its new place.
    fn relink(&mut self, prev: u32, next: u32, to: u32) {
        match prev {
            NIL => self.head = to,
            prev => self.nodes[prev as usize].next = to,
        }
        match next {
            NIL => self.tail = to,
            next => self.nodes[next as usize].prev = to,
        }
    }

    fn unlink(&mut self, at: u32) {
        let (prev, next) = {
            let node = &self.nodes[at as usize];
            (node.prev, node.next)
        };
        match prev {
            NIL => self.head = next,
            prev => self.nodes[prev as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            next => self.nodes[next as usize].prev = prev,
        }
        let node = &mut self.nodes[at as usize];
        node.prev = NIL;
        node.next = NIL;
    }

    fn link_front(&mut self, at: u32) {
        let old_head = self.head;
        {
            let node = &mut self.nodes[at as usize];
            node.prev = NIL;
            node.next = old_head;
        }
        match old_head {
            NIL => self.tail = at,
            head => self.nodes[head as usize].prev = at,
        }
        self.head = at;
    }
}

#[cfg(test)]
mod tests {
    use super::{Entry, Lru};
    use crate::storage::test_util::id;

    fn entry(body_len: u64) -> Entry {
        Entry {
            generation: body_len,
            body_len,
            meta_len: 0,
            meta_version: 0,
        }
    }

    #[test]
    fn evicts_least_recent_first_and_touch_refreshes() {
        let mut lru = Lru::new();
        for n in 0..5 {
            lru.insert(id(n), entry(100));
        }
        assert_eq!(lru.touch(id(0)), Some(entry(100)));
        let per_object = entry(100).bytes();
        let evicted = lru.evict_to(per_object * 3, None);
        let ids: Vec<_> = evicted.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![id(1), id(2)]);
        assert_eq!(lru.ids(), vec![id(3), id(4), id(0)]);
        assert_eq!(lru.bytes(), per_object * 3);
    }

    #[test]
    fn removal_anywhere_keeps_the_order_and_the_map() {
        let mut lru = Lru::new();
        for n in 0..6 {
            lru.insert(id(n), entry(u64::from(n)));
        }
        // Middle, head, tail, and the node stored last in the Vec (which is moved).
        for gone in [2, 5, 0, 4] {
            assert_eq!(lru.remove(id(gone)), Some(entry(u64::from(gone))));
        }
        assert_eq!(lru.remove(id(2)), None);
        assert_eq!(lru.ids(), vec![id(1), id(3)]);
        assert_eq!(lru.get(id(3)), Some(entry(3)));
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.bytes(), entry(1).bytes() + entry(3).bytes());
    }

    #[test]
    fn replacing_keeps_one_node_and_returns_the_old_entry() {
        let mut lru = Lru::new();
        lru.insert(id(1), entry(10));
        lru.insert(id(2), entry(20));
        assert_eq!(lru.insert(id(1), entry(10_000)), Some(entry(10)));
        assert_eq!(lru.ids(), vec![id(2), id(1)]);
        assert_eq!(lru.bytes(), entry(20).bytes() + entry(10_000).bytes());
    }

    #[test]
    fn the_kept_object_is_never_evicted() {
        let mut lru = Lru::new();
        lru.insert(id(1), entry(10));
        lru.insert(id(2), entry(10));
        lru.touch(id(1));
        let evicted = lru.evict_to(0, Some(id(2)));
        assert_eq!(evicted, vec![(id(1), entry(10))]);
        assert_eq!(lru.ids(), vec![id(2)]);
    }
}

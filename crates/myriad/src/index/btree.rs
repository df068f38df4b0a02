//! TEMPORARY placeholder until the real B+tree lands.
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;
pub enum ScanDirection {
    Ascending,
    Descending,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafVersion(u64);
#[derive(Default)]
pub struct BTree {
    m: RwLock<BTreeMap<Vec<u8>, u64>>,
}
impl BTree {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn insert(&self, key: &[u8], value: u64) -> Result<(), u64> {
        let mut m = self.m.write();
        if let Some(v) = m.get(key) {
            return Err(*v);
        }
        m.insert(key.to_vec(), value);
        Ok(())
    }
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.m.read().get(key).copied()
    }
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        _leaves: Option<&mut Vec<LeafVersion>>,
        f: &mut dyn FnMut(&[u8], u64) -> bool,
    ) {
        let items: Vec<(Vec<u8>, u64)> = self
            .m
            .read()
            .range::<[u8], _>((lo, hi))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        match dir {
            ScanDirection::Ascending => {
                for (k, v) in items {
                    if !f(&k, v) {
                        break;
                    }
                }
            }
            ScanDirection::Descending => {
                for (k, v) in items.into_iter().rev() {
                    if !f(&k, v) {
                        break;
                    }
                }
            }
        }
    }
    pub fn len(&self) -> usize {
        self.m.read().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

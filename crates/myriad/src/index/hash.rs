//! TEMPORARY placeholder until the real hash index lands.
use parking_lot::RwLock;
use std::collections::HashMap;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketVersion(u64);
pub struct HashIndex { m: RwLock<HashMap<Vec<u8>, Vec<u64>>> }
impl HashIndex {
    pub fn new(_h: usize) -> Self { HashIndex { m: RwLock::new(HashMap::new()) } }
    pub fn insert_unique(&self, key: &[u8], tid: u64) -> Result<(), u64> {
        let mut m = self.m.write();
        if let Some(v) = m.get(key) { return Err(v[0]); }
        m.insert(key.to_vec(), vec![tid]); Ok(())
    }
    pub fn insert(&self, key: &[u8], tid: u64) -> bool {
        let mut m = self.m.write();
        let v = m.entry(key.to_vec()).or_default();
        if v.contains(&tid) { false } else { v.push(tid); true }
    }
    pub fn get(&self, key: &[u8]) -> Option<u64> { self.m.read().get(key).map(|v| v[0]) }
    pub fn for_each(&self, key: &[u8], f: &mut dyn FnMut(u64) -> bool) {
        let v = self.m.read().get(key).cloned().unwrap_or_default();
        for t in v { if !f(t) { break } }
    }
    pub fn len(&self) -> usize { self.m.read().len() }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
}

//! A minimal slab: stable typed indices, O(1) insert/remove, slots reused;
//! and FxHash, the fast hasher for keys we choose ourselves.

use core::marker::PhantomData;

/// The index type of a [`Slab`]: a `u32` newtype, declared with [`slab_key!`],
/// so that an index into one store cannot be used with another.
pub trait SlabKey: Copy {
    /// The key of slot `i`.
    fn from_slot(i: u32) -> Self;
    /// The slot of this key.
    fn slot(self) -> u32;
}

/// Declare a `u32` newtype usable as a [`Slab`] key.
macro_rules! slab_key {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) struct $name(u32);

        impl $crate::slab::SlabKey for $name {
            #[inline]
            fn from_slot(i: u32) -> Self {
                $name(i)
            }
            #[inline]
            fn slot(self) -> u32 {
                self.0
            }
        }
    };
}
pub(crate) use slab_key;

/// Slot storage with a free list, indexed by keys of type `K`.
#[derive(Debug)]
pub struct Slab<K, T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
    len: usize,
    key: PhantomData<K>,
}

impl<K, T> Default for Slab<K, T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
            len: 0,
            key: PhantomData,
        }
    }
}

impl<K: SlabKey, T> Slab<K, T> {
    /// Store `v`, returning its key.
    #[inline]
    pub fn insert(&mut self, v: T) -> K {
        self.len += 1;
        if let Some(i) = self.free.pop() {
            self.items[i as usize] = Some(v);
            K::from_slot(i)
        } else {
            self.items.push(Some(v));
            K::from_slot((self.items.len() - 1) as u32)
        }
    }

    /// Remove and return the value at `k`.
    #[inline]
    pub fn remove(&mut self, k: K) -> Option<T> {
        let i = k.slot();
        let v = self.items.get_mut(i as usize)?.take();
        if v.is_some() {
            self.len -= 1;
            self.free.push(i);
        }
        v
    }

    /// Shared access.
    #[inline]
    pub fn get(&self, k: K) -> Option<&T> {
        self.items.get(k.slot() as usize)?.as_ref()
    }

    /// Exclusive access.
    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut T> {
        self.items.get_mut(k.slot() as usize)?.as_mut()
    }

    /// Number of stored values.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keys and values of everything stored, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &T)> + '_ {
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((K::from_slot(i as u32), v.as_ref()?)))
    }
}

/// FxHash (the rustc hasher): a fast non-cryptographic hash for keys we
/// choose ourselves (peer keys, operation tokens), never for keys an attacker
/// picks.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher(u64);

const FX_K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl core::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(FX_K);
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// `BuildHasher` for [`FxHasher`].
pub type FxBuild = core::hash::BuildHasherDefault<FxHasher>;

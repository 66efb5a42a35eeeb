//! The atomic operations of fi_atomic(3) on the datatypes of
//! `enum fi_datatype`: which (operation, datatype) pairs exist in which
//! form — plain (`fi_atomic`), fetching (`fi_fetch_atomic`), compare
//! (`fi_compare_atomic`) — and their execution on target memory.
//!
//! Offered: every operation on the integer types FI_INT8 … FI_UINT64;
//! FI_MIN, FI_MAX, FI_SUM, FI_PROD, FI_ATOMIC_READ, FI_ATOMIC_WRITE and the
//! FI_CSWAP family on FI_FLOAT and FI_DOUBLE (the bit operations, logical
//! operations and FI_MSWAP are defined for integers only). Not offered: the
//! complex types, FI_LONG_DOUBLE(_COMPLEX) and the 128-bit integers.
//!
//! Execution is serialised by the caller's lock, so an operation is atomic
//! with respect to every other atomic the provider executes in the process
//! (fi_atomic(3) promises atomicity among the provider's own operations).

use libc::c_int;
use ofi_xdp_reliability::MAX_ATOMIC_BYTES;

use crate::sys::*;

/// The three forms of fi_atomic(3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// fi_atomic: no result.
    Plain,
    /// fi_fetch_atomic: the old values come back.
    Fetch,
    /// fi_compare_atomic: compare values go along, old values come back.
    Compare,
}

/// Bytes of one element of `datatype`, if we offer it.
pub fn datatype_size(datatype: c_int) -> Option<usize> {
    Some(match datatype {
        FI_INT8 | FI_UINT8 => 1,
        FI_INT16 | FI_UINT16 => 2,
        FI_INT32 | FI_UINT32 | FI_FLOAT => 4,
        FI_INT64 | FI_UINT64 | FI_DOUBLE => 8,
        _ => return None,
    })
}

/// Largest element count of one atomic of `datatype` in `form` (what
/// fi_atomicvalid and fi_query_atomic report): operands, and compare
/// values, fit one datagram (PROTOCOL.md §8.4).
pub fn max_count(form: Form, datatype: c_int) -> Option<usize> {
    let size = datatype_size(datatype)?;
    Some(match form {
        Form::Compare => MAX_ATOMIC_BYTES / (2 * size),
        _ => MAX_ATOMIC_BYTES / size,
    })
}

fn is_float(datatype: c_int) -> bool {
    matches!(datatype, FI_FLOAT | FI_DOUBLE)
}

/// Whether `op` on `datatype` is offered in `form` (fi_atomicvalid,
/// fi_fetch_atomicvalid, fi_compare_atomicvalid, fi_query_atomic).
pub fn valid(form: Form, datatype: c_int, op: c_int) -> bool {
    if datatype_size(datatype).is_none() {
        return false;
    }
    let float = is_float(datatype);
    match op {
        FI_MIN | FI_MAX | FI_SUM | FI_PROD | FI_ATOMIC_WRITE => form != Form::Compare,
        FI_LOR | FI_LAND | FI_BOR | FI_BAND | FI_LXOR | FI_BXOR => form != Form::Compare && !float,
        // Reading needs a result.
        FI_ATOMIC_READ => form == Form::Fetch,
        FI_CSWAP | FI_CSWAP_NE | FI_CSWAP_LE | FI_CSWAP_LT | FI_CSWAP_GE | FI_CSWAP_GT => {
            form == Form::Compare
        }
        FI_MSWAP => form == Form::Compare && !float,
        _ => false,
    }
}

/// The form an operation code belongs to when it comes back from the wire
/// with `fetch` (a result was asked for).
pub fn form_of(op: c_int, fetch: bool) -> Form {
    match op {
        FI_CSWAP..=FI_MSWAP => Form::Compare,
        _ if fetch => Form::Fetch,
        _ => Form::Plain,
    }
}

/// Element arithmetic of one datatype.
trait Elem: Copy + PartialOrd {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Bitwise and logical operations (integers only; floats never get here).
    fn bits(self, op: c_int, o: Self) -> Self;
    /// FI_MSWAP: `(o & mask) | (self & !mask)` (integers only).
    fn mswap(self, o: Self, mask: Self) -> Self;
}

/// The bytes of an element: native order, as the application wrote them.
macro_rules! elem_bytes {
    ($t:ty) => {
        const SIZE: usize = size_of::<$t>();
        fn load(b: &[u8]) -> Self {
            let mut a = [0u8; size_of::<$t>()];
            a.copy_from_slice(&b[..Self::SIZE]);
            <$t>::from_ne_bytes(a)
        }
        fn store(self, b: &mut [u8]) {
            b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
        }
    };
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            elem_bytes!($t);
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn bits(self, op: c_int, o: Self) -> Self {
                let (a, b) = (self != 0, o != 0);
                match op {
                    FI_LOR => <$t>::from(a || b),
                    FI_LAND => <$t>::from(a && b),
                    FI_LXOR => <$t>::from(a != b),
                    FI_BOR => self | o,
                    FI_BAND => self & o,
                    FI_BXOR => self ^ o,
                    _ => self,
                }
            }
            fn mswap(self, o: Self, mask: Self) -> Self {
                (o & mask) | (self & !mask)
            }
        }
    )*};
}
int_elem!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            elem_bytes!($t);
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn bits(self, _: c_int, _: Self) -> Self {
                self
            }
            fn mswap(self, _: Self, _: Self) -> Self {
                self
            }
        }
    )*};
}
float_elem!(f32, f64);

/// The new value of a target element `t` under `op` with operand `o` and
/// compare value `c` (fi_atomic(3) "Atomic Operations").
fn apply<T: Elem>(op: c_int, t: T, o: T, c: T) -> T {
    let swap_if = |cond: bool| if cond { o } else { t };
    match op {
        FI_MIN => {
            if o < t {
                o
            } else {
                t
            }
        }
        FI_MAX => {
            if o > t {
                o
            } else {
                t
            }
        }
        FI_SUM => t.add(o),
        FI_PROD => t.mul(o),
        FI_LOR | FI_LAND | FI_BOR | FI_BAND | FI_LXOR | FI_BXOR => t.bits(op, o),
        FI_ATOMIC_READ => t,
        FI_ATOMIC_WRITE => o,
        FI_CSWAP => swap_if(c == t),
        FI_CSWAP_NE => swap_if(c != t),
        FI_CSWAP_LE => swap_if(c <= t),
        FI_CSWAP_LT => swap_if(c < t),
        FI_CSWAP_GE => swap_if(c >= t),
        FI_CSWAP_GT => swap_if(c > t),
        // The compare buffer holds the mask (integers only, see `valid`).
        FI_MSWAP => t.mswap(o, c),
        _ => t,
    }
}

fn run<T: Elem>(op: c_int, target: &mut [u8], operands: &[u8], compare: &[u8], result: &mut [u8]) {
    let n = target.len() / T::SIZE;
    for i in 0..n {
        let r = i * T::SIZE..(i + 1) * T::SIZE;
        let t = T::load(&target[r.clone()]);
        let o = if operands.is_empty() {
            t
        } else {
            T::load(&operands[r.clone()])
        };
        let c = if compare.is_empty() {
            t
        } else {
            T::load(&compare[r.clone()])
        };
        if !result.is_empty() {
            t.store(&mut result[r.clone()]);
        }
        apply(op, t, o, c).store(&mut target[r]);
    }
}

/// Execute `op` on `datatype` over the elements of `target` (a copy of the
/// target memory, written back by the caller), with `operands` and
/// `compare` (empty when the form has none), writing the old values into
/// `result` (empty when the form has none). Lengths were checked by
/// [`lengths`].
pub fn execute(
    op: c_int,
    datatype: c_int,
    target: &mut [u8],
    operands: &[u8],
    compare: &[u8],
    result: &mut [u8],
) {
    match datatype {
        FI_INT8 => run::<i8>(op, target, operands, compare, result),
        FI_UINT8 => run::<u8>(op, target, operands, compare, result),
        FI_INT16 => run::<i16>(op, target, operands, compare, result),
        FI_UINT16 => run::<u16>(op, target, operands, compare, result),
        FI_INT32 => run::<i32>(op, target, operands, compare, result),
        FI_UINT32 => run::<u32>(op, target, operands, compare, result),
        FI_INT64 => run::<i64>(op, target, operands, compare, result),
        FI_UINT64 => run::<u64>(op, target, operands, compare, result),
        FI_FLOAT => run::<f32>(op, target, operands, compare, result),
        FI_DOUBLE => run::<f64>(op, target, operands, compare, result),
        _ => {}
    }
}

/// A target's view of an incoming atomic: its form, and the split of the
/// wire payload into operands and compare values, if the lengths fit the
/// operation (PROTOCOL.md §8.4): `(form, element count, operands, compare)`.
pub fn lengths(
    op: c_int,
    datatype: c_int,
    payload: &[u8],
    result_len: usize,
) -> Option<(Form, usize, &[u8], &[u8])> {
    let size = datatype_size(datatype)?;
    let form = form_of(op, result_len > 0);
    if !valid(form, datatype, op) {
        return None;
    }
    let (count, operands, compare) = match form {
        Form::Plain => (payload.len() / size, payload, &payload[..0]),
        Form::Fetch if op == FI_ATOMIC_READ => (result_len / size, &payload[..0], &payload[..0]),
        Form::Fetch => (payload.len() / size, payload, &payload[..0]),
        Form::Compare => {
            let (o, c) = payload.split_at(payload.len() / 2);
            (o.len() / size, o, c)
        }
    };
    let bytes = count * size;
    let fits = operands.len() == if op == FI_ATOMIC_READ { 0 } else { bytes }
        && compare.len() == if form == Form::Compare { bytes } else { 0 }
        && result_len == if form == Form::Plain { 0 } else { bytes }
        && count > 0;
    fits.then_some((form, count, operands, compare))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one<T: Elem>(op: c_int, datatype: c_int, t: T, o: T, c: T) -> (T, T) {
        let mut tb = vec![0u8; T::SIZE];
        let (mut ob, mut cb, mut rb) = (tb.clone(), tb.clone(), tb.clone());
        t.store(&mut tb);
        o.store(&mut ob);
        c.store(&mut cb);
        let compare: &[u8] = if form_of(op, true) == Form::Compare {
            &cb
        } else {
            &[]
        };
        execute(op, datatype, &mut tb, &ob, compare, &mut rb);
        (T::load(&tb), T::load(&rb))
    }

    #[test]
    fn integer_operations() {
        assert_eq!(one::<i32>(FI_MIN, FI_INT32, 5, -3, 0), (-3, 5));
        assert_eq!(one::<u8>(FI_MAX, FI_UINT8, 5, 200, 0), (200, 5));
        assert_eq!(one::<u64>(FI_SUM, FI_UINT64, u64::MAX, 2, 0), (1, u64::MAX));
        assert_eq!(one::<i16>(FI_PROD, FI_INT16, -4, 3, 0), (-12, -4));
        assert_eq!(one::<u32>(FI_LOR, FI_UINT32, 0, 7, 0), (1, 0));
        assert_eq!(one::<u32>(FI_LAND, FI_UINT32, 2, 0, 0), (0, 2));
        assert_eq!(one::<u32>(FI_LXOR, FI_UINT32, 2, 3, 0), (0, 2));
        assert_eq!(
            one::<u32>(FI_BOR, FI_UINT32, 0b1010, 0b0101, 0),
            (0b1111, 0b1010)
        );
        assert_eq!(
            one::<u32>(FI_BAND, FI_UINT32, 0b1110, 0b0111, 0),
            (0b0110, 0b1110)
        );
        assert_eq!(
            one::<u32>(FI_BXOR, FI_UINT32, 0b1110, 0b0111, 0),
            (0b1001, 0b1110)
        );
        assert_eq!(one::<i64>(FI_ATOMIC_WRITE, FI_INT64, 1, 9, 0), (9, 1));
        assert_eq!(one::<i64>(FI_ATOMIC_READ, FI_INT64, 4, 9, 0), (4, 4));
        assert_eq!(one::<u64>(FI_CSWAP, FI_UINT64, 4, 9, 4), (9, 4));
        assert_eq!(one::<u64>(FI_CSWAP, FI_UINT64, 4, 9, 5), (4, 4));
        assert_eq!(one::<u64>(FI_CSWAP_NE, FI_UINT64, 4, 9, 5), (9, 4));
        assert_eq!(one::<i8>(FI_CSWAP_LE, FI_INT8, 4, 9, 4), (9, 4));
        assert_eq!(one::<i8>(FI_CSWAP_LT, FI_INT8, 4, 9, 4), (4, 4));
        assert_eq!(one::<i8>(FI_CSWAP_GE, FI_INT8, 4, 9, 4), (9, 4));
        assert_eq!(one::<i8>(FI_CSWAP_GT, FI_INT8, 4, 9, 5), (9, 4));
        // Bits of the operand where the mask is set, the target's elsewhere.
        assert_eq!(
            one::<u16>(FI_MSWAP, FI_UINT16, 0xAAAA, 0x5555, 0x00FF),
            (0xAA55, 0xAAAA)
        );
    }

    #[test]
    fn float_operations() {
        assert_eq!(one::<f64>(FI_SUM, FI_DOUBLE, 1.5, 2.25, 0.0), (3.75, 1.5));
        assert_eq!(one::<f32>(FI_MIN, FI_FLOAT, 1.5, -2.0, 0.0), (-2.0, 1.5));
        assert_eq!(one::<f64>(FI_CSWAP, FI_DOUBLE, 1.0, 7.0, 1.0), (7.0, 1.0));
    }

    #[test]
    fn validity_follows_the_forms() {
        assert!(valid(Form::Plain, FI_INT32, FI_SUM));
        assert!(valid(Form::Fetch, FI_UINT64, FI_ATOMIC_READ));
        assert!(!valid(Form::Plain, FI_UINT64, FI_ATOMIC_READ));
        assert!(!valid(Form::Plain, FI_UINT64, FI_CSWAP));
        assert!(valid(Form::Compare, FI_DOUBLE, FI_CSWAP_GT));
        assert!(!valid(Form::Compare, FI_DOUBLE, FI_MSWAP));
        assert!(!valid(Form::Plain, FI_FLOAT, FI_BXOR));
        assert!(!valid(Form::Plain, FI_DOUBLE_COMPLEX, FI_SUM));
        assert!(!valid(Form::Plain, FI_LONG_DOUBLE, FI_SUM));
        assert!(!valid(Form::Plain, FI_INT32, 99));
    }

    #[test]
    fn lengths_split_the_payload() {
        let p = [0u8; 16];
        assert!(
            matches!(lengths(FI_CSWAP, FI_UINT64, &p, 8), Some((Form::Compare, 1, o, c)) if o.len() == 8 && c.len() == 8)
        );
        assert!(lengths(FI_CSWAP, FI_UINT64, &p, 16).is_none());
        assert!(matches!(
            lengths(FI_SUM, FI_UINT32, &p, 0),
            Some((Form::Plain, 4, _, _))
        ));
        assert!(matches!(
            lengths(FI_ATOMIC_READ, FI_UINT32, &[], 8),
            Some((Form::Fetch, 2, _, _))
        ));
        assert!(lengths(FI_SUM, FI_UINT32, &p[..3], 0).is_none());
        assert!(lengths(FI_SUM, FI_UINT32, &[], 0).is_none());
    }
}

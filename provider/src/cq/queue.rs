//! The queue behind a CQ, kept free of any libfabric object so its fi_cq(3)
//! rules can be unit-tested: successes and errors in completion order,
//! read and readerr as "RETURN VALUES" describes them, and the entry
//! formats (FI_CQ_FORMAT_*) a read writes.

use std::collections::VecDeque;

use libc::{c_int, c_void};

use crate::abi::{self, Errno, Result};
use crate::datapath::{Completion, CompletionError};
use crate::sys::*;

/// The queue behind a CQ: successes and errors in completion order, plus
/// the provider-owned err_data of the last readerr. Kept free of any
/// libfabric object so its fi_cq(3) rules can be unit-tested.
#[derive(Default)]
pub struct CompletionQueue {
    entries: VecDeque<Completion>,
    last_err_data: Vec<u8>,
}

impl CompletionQueue {
    pub fn push(&mut self, c: Completion) {
        self.entries.push_back(c);
    }

    /// fi_cq_read: up to `count` successful completions from the head, in
    /// order, stopping before the first error; -FI_EAVAIL if an error is at
    /// the head, -FI_EAGAIN if the queue is empty ("RETURN VALUES"). A zero
    /// `count` (only driving progress) reads nothing and returns 0 when
    /// successes wait.
    pub fn read_into(
        &mut self,
        count: usize,
        mut out: impl FnMut(usize, &Completion),
    ) -> Result<usize> {
        let mut n = 0;
        while n < count {
            match self.entries.front() {
                Some(c) if c.error.is_none() => {
                    out(n, c);
                    self.entries.pop_front();
                    n += 1;
                }
                _ => break,
            }
        }
        if n > 0 {
            return Ok(n);
        }
        match self.entries.front() {
            Some(c) if c.error.is_some() => Err(Errno::AVAIL),
            Some(_) => Ok(0),
            None => Err(Errno::AGAIN),
        }
    }

    /// fi_cq_readerr: remove the oldest error completion, if any.
    pub fn take_error(&mut self) -> Option<(Completion, CompletionError)> {
        let i = self.entries.iter().position(|c| c.error.is_some())?;
        let mut c = self.entries.remove(i)?;
        let e = c.error.take()?;
        Some((c, e))
    }

    /// Keep `err_data` alive until the next readerr (fi_cq(3) compatibility
    /// note) and return where it lives.
    pub fn hold_err_data(&mut self, data: Vec<u8>) -> (*mut c_void, usize) {
        abi::hold_err_data(&mut self.last_err_data, data)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn head_is_error(&self) -> bool {
        self.entries.front().is_some_and(|c| c.error.is_some())
    }
}

/// Bytes of one entry of `format`.
pub fn entry_size(format: c_int) -> usize {
    match format {
        FI_CQ_FORMAT_MSG => size_of::<fi_cq_msg_entry>(),
        FI_CQ_FORMAT_DATA => size_of::<fi_cq_data_entry>(),
        FI_CQ_FORMAT_TAGGED => size_of::<fi_cq_tagged_entry>(),
        _ => size_of::<fi_cq_entry>(),
    }
}

/// Write completion `c` as entry `i` of a `format` array at `buf`.
///
/// # Safety
/// `buf` must hold at least `i + 1` entries of `format`.
pub unsafe fn write_entry(format: c_int, buf: *mut c_void, i: usize, c: &Completion) {
    let ctx = c.op_context as *mut c_void;
    // SAFETY: per caller; each arm writes exactly one entry of its format.
    unsafe {
        match format {
            FI_CQ_FORMAT_MSG => buf.cast::<fi_cq_msg_entry>().add(i).write(fi_cq_msg_entry {
                op_context: ctx,
                flags: c.flags,
                len: c.len,
            }),
            FI_CQ_FORMAT_DATA => buf
                .cast::<fi_cq_data_entry>()
                .add(i)
                .write(fi_cq_data_entry {
                    op_context: ctx,
                    flags: c.flags,
                    len: c.len,
                    buf: c.buf as *mut c_void,
                    data: c.data,
                }),
            FI_CQ_FORMAT_TAGGED => {
                buf.cast::<fi_cq_tagged_entry>()
                    .add(i)
                    .write(fi_cq_tagged_entry {
                        op_context: ctx,
                        flags: c.flags,
                        len: c.len,
                        buf: c.buf as *mut c_void,
                        data: c.data,
                        tag: c.tag,
                    })
            }
            _ => buf
                .cast::<fi_cq_entry>()
                .add(i)
                .write(fi_cq_entry { op_context: ctx }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ctx: usize) -> Completion {
        Completion {
            op_context: ctx,
            flags: FI_RECV | FI_MSG,
            len: ctx * 10,
            ..Default::default()
        }
    }

    fn err(ctx: usize, e: c_int) -> Completion {
        Completion {
            op_context: ctx,
            error: Some(CompletionError {
                err: e,
                prov_errno: e,
                olen: 3,
                err_data: vec![1, 2],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn empty_is_eagain() {
        let mut q = CompletionQueue::default();
        assert_eq!(q.read_into(4, |_, _| {}), Err(Errno::AGAIN));
        assert!(q.take_error().is_none());
    }

    #[test]
    fn successes_before_an_error_are_read_then_eavail() {
        let mut q = CompletionQueue::default();
        q.push(ok(1));
        q.push(ok(2));
        q.push(err(3, FI_ETRUNC));
        q.push(ok(4));
        let mut seen = Vec::new();
        assert_eq!(q.read_into(8, |i, c| seen.push((i, c.op_context))), Ok(2));
        assert_eq!(seen, [(0, 1), (1, 2)]);
        // The error is now at the head: read reports it, readerr takes it.
        assert_eq!(q.read_into(8, |_, _| {}), Err(Errno::AVAIL));
        let (c, e) = q.take_error().unwrap();
        assert_eq!((c.op_context, e.err, e.olen), (3, FI_ETRUNC, 3));
        assert_eq!(q.read_into(8, |_, c| assert_eq!(c.op_context, 4)), Ok(1));
        assert_eq!(q.read_into(8, |_, _| {}), Err(Errno::AGAIN));
    }

    /// fi_cq_read with count 0 drives progress: 0 when successes wait,
    /// -FI_EAVAIL only when an error is at the head, -FI_EAGAIN when empty.
    #[test]
    fn zero_count_reads_nothing() {
        let mut q = CompletionQueue::default();
        assert_eq!(q.read_into(0, |_, _| {}), Err(Errno::AGAIN));
        q.push(ok(1));
        assert_eq!(q.read_into(0, |_, _| {}), Ok(0));
        assert_eq!(q.len(), 1);
        assert_eq!(q.read_into(1, |_, _| {}), Ok(1));
        q.push(err(2, FI_ETRUNC));
        assert_eq!(q.read_into(0, |_, _| {}), Err(Errno::AVAIL));
    }

    #[test]
    fn count_limits_and_order() {
        let mut q = CompletionQueue::default();
        for i in 0..5 {
            q.push(ok(i));
        }
        let mut seen = Vec::new();
        assert_eq!(q.read_into(3, |_, c| seen.push(c.op_context)), Ok(3));
        assert_eq!(q.read_into(3, |_, c| seen.push(c.op_context)), Ok(2));
        assert_eq!(seen, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn readerr_takes_the_oldest_error_even_behind_successes() {
        let mut q = CompletionQueue::default();
        q.push(ok(1));
        q.push(err(2, FI_ECANCELED));
        q.push(err(3, FI_ETRUNC));
        assert_eq!(q.take_error().map(|(c, _)| c.op_context), Some(2));
        assert_eq!(q.take_error().map(|(c, _)| c.op_context), Some(3));
        assert_eq!(q.len(), 1);
        assert!(!q.head_is_error());
    }

    #[test]
    fn provider_owned_err_data_lives_until_the_next_readerr() {
        let mut q = CompletionQueue::default();
        let (p, n) = q.hold_err_data(vec![9, 8, 7]);
        assert_eq!(n, 3);
        // SAFETY: p points at the 3 bytes held by q.
        assert_eq!(
            unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) },
            [9, 8, 7]
        );
        let (p, n) = q.hold_err_data(Vec::new());
        assert!(p.is_null() && n == 0);
    }

    #[test]
    fn entries_are_written_in_each_format() {
        let c = Completion {
            op_context: 0x10,
            flags: FI_RECV,
            len: 5,
            buf: 0x20,
            data: 7,
            tag: 9,
            ..Default::default()
        };
        let mut t = [fi_cq_tagged_entry {
            op_context: std::ptr::null_mut(),
            flags: 0,
            len: 0,
            buf: std::ptr::null_mut(),
            data: 0,
            tag: 0,
        }; 2];
        // SAFETY: t holds two tagged entries.
        unsafe { write_entry(FI_CQ_FORMAT_TAGGED, t.as_mut_ptr().cast(), 1, &c) };
        assert_eq!(
            (
                t[1].op_context as usize,
                t[1].len,
                t[1].buf as usize,
                t[1].data,
                t[1].tag
            ),
            (0x10, 5, 0x20, 7, 9)
        );
        assert!(t[0].op_context.is_null());
        let mut m = [0u64; 6];
        // SAFETY: 48 bytes hold two msg entries (24 bytes each).
        unsafe { write_entry(FI_CQ_FORMAT_MSG, m.as_mut_ptr().cast(), 1, &c) };
        assert_eq!(&m[3..6], &[0x10, FI_RECV, 5]);
        let mut x = [0u64; 2];
        // SAFETY: two context entries.
        unsafe { write_entry(FI_CQ_FORMAT_CONTEXT, x.as_mut_ptr().cast(), 1, &c) };
        assert_eq!(x, [0, 0x10]);
        assert_eq!(entry_size(FI_CQ_FORMAT_DATA), 40);
    }
}

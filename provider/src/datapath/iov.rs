//! An operation's buffers: the application's iov as (address, length)
//! pairs, and the one copy per direction between them and a datagram
//! (scatter into a receive's iov, gather from a send's).

use std::borrow::Cow;

/// An operation's buffers as (address, length). Nearly every operation has
/// one, kept inline: no allocation per operation on the latency path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Iov {
    One((usize, usize)),
    Many(Vec<(usize, usize)>),
}

impl Iov {
    /// No buffers (a zero-length operation).
    pub fn empty() -> Iov {
        Iov::Many(Vec::new())
    }
}

impl std::ops::Deref for Iov {
    type Target = [(usize, usize)];
    fn deref(&self) -> &[(usize, usize)] {
        match self {
            Iov::One(b) => std::slice::from_ref(b),
            Iov::Many(v) => v,
        }
    }
}

impl From<Vec<(usize, usize)>> for Iov {
    fn from(v: Vec<(usize, usize)>) -> Iov {
        match v[..] {
            [b] => Iov::One(b),
            _ => Iov::Many(v),
        }
    }
}

/// Where the bytes of an operation live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// The application's buffers as (address, length); valid until the
    /// operation's completion is reported.
    Iov(Iov),
    /// FI_INJECT, fi_inject*: the application's buffers, but valid only until
    /// the posting call returns (the caller may reuse them at once,
    /// fi_msg(3)). The data path copies what it keeps before returning.
    Inject(Iov),
}

impl Payload {
    /// The buffers as (address, length).
    pub fn iov(&self) -> &[(usize, usize)] {
        match self {
            Payload::Iov(v) | Payload::Inject(v) => v,
        }
    }
    pub fn len(&self) -> usize {
        self.iov().iter().map(|(_, l)| *l).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The pieces `(address, length)` of the list `iov` that hold its bytes
/// `[offset, offset + len)`, in order; fewer bytes in all where the list
/// ends first.
pub fn pieces(
    iov: &[(usize, usize)],
    mut offset: usize,
    mut len: usize,
) -> impl Iterator<Item = (usize, usize)> + '_ {
    iov.iter().filter_map(move |&(base, l)| {
        if len == 0 {
            return None;
        }
        if offset >= l {
            offset -= l;
            return None;
        }
        let n = (l - offset).min(len);
        let piece = (base + offset, n);
        len -= n;
        offset = 0;
        Some(piece)
    })
}

/// Copy `src` into the scatter list `iov` starting at byte `offset`;
/// returns the bytes copied (bounded by the list's capacity).
///
/// # Safety
/// Every `(addr, len)` in `iov` must be writable application memory, as
/// fi_recv(3) requires until the receive completes.
pub unsafe fn scatter(iov: &[(usize, usize)], offset: usize, src: &[u8]) -> usize {
    let mut done = 0;
    for (addr, n) in pieces(iov, offset, src.len()) {
        // SAFETY: within the application's buffer per the caller.
        unsafe { std::ptr::copy_nonoverlapping(src[done..].as_ptr(), addr as *mut u8, n) };
        done += n;
    }
    done
}

/// Copy bytes from the gather list `iov`, starting at byte `offset`, into
/// `dst` (zero-filling anything past the list's end).
///
/// # Safety
/// Every `(addr, len)` in `iov` must be readable application memory, as
/// fi_send(3) requires until the send completes.
pub unsafe fn gather(iov: &[(usize, usize)], offset: usize, dst: &mut [u8]) {
    let mut at = 0;
    for (addr, n) in pieces(iov, offset, dst.len()) {
        // SAFETY: within the application's buffer per the caller.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, dst[at..].as_mut_ptr(), n) };
        at += n;
    }
    dst[at..].fill(0);
}

/// Copy an operation's buffers. Only for the application's iov inside the
/// posting call, while the caller guarantees its buffers (fi_msg(3)).
pub fn gather_iov(iov: &[(usize, usize)]) -> Vec<u8> {
    let mut b = vec![0u8; iov.iter().map(|(_, l)| *l).sum()];
    // SAFETY: the caller's buffers hold their lengths until the posting
    // call returns (fi_msg(3)); we are inside that call.
    unsafe { gather(iov, 0, &mut b) };
    b
}

/// The bytes of `iov` as one slice: the application's buffer itself when it
/// is in one piece (no copy: the caller copies what it keeps), else a
/// gathered copy.
///
/// # Safety
/// Only inside the posting call, while the caller guarantees its buffers
/// (fi_msg(3)); the slice must not outlive that call.
pub unsafe fn contiguous(iov: &[(usize, usize)]) -> Cow<'_, [u8]> {
    match iov {
        [] => Cow::Borrowed(&[]),
        // SAFETY: the caller guarantees the buffer for this call (above);
        // the endpoint checked that a non-empty buffer is not NULL.
        [(addr, len)] if *addr != 0 => {
            Cow::Borrowed(unsafe { std::slice::from_raw_parts(*addr as *const u8, *len) })
        }
        _ => Cow::Owned(gather_iov(iov)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_gather_across_iovs() {
        let mut a = [0u8; 3];
        let mut b = [0u8; 5];
        let iov = [(a.as_mut_ptr() as usize, 3), (b.as_mut_ptr() as usize, 5)];
        // SAFETY: iov points at the two local arrays.
        let n = unsafe { scatter(&iov, 2, &[1, 2, 3, 4, 5, 6, 7, 8]) };
        assert_eq!(n, 6);
        assert_eq!(a, [0, 0, 1]);
        assert_eq!(b, [2, 3, 4, 5, 6]);
        let mut out = [9u8; 7];
        // SAFETY: as above.
        unsafe { gather(&iov, 1, &mut out) };
        assert_eq!(out, [0, 1, 2, 3, 4, 5, 6]);
        let mut tail = [9u8; 4];
        // SAFETY: as above.
        unsafe { gather(&iov, 6, &mut tail) };
        assert_eq!(tail, [5, 6, 0, 0]);
    }
}

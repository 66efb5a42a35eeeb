//! Public types of the engine API: configuration, operations, events, errors,
//! statistics and the buffer-access traits that keep copies to one per direction.

use crate::rma::{Access, RmaStatus};
use crate::time::Nanos;

/// Largest message the engine accepts: 1 GiB (`fi_ep_attr::max_msg_size`).
/// The wire carries 32-bit lengths and offsets; 1 GiB keeps well inside them.
pub const MAX_MSG_SIZE: usize = 1 << 30;

/// Engine parameters. [`Config::default`] gives values suitable for a 1500-byte
/// Ethernet MTU on a LAN.
#[derive(Clone, Debug)]
pub struct Config {
    /// Largest datagram (our header + payload + CRC) the link can carry, i.e. the
    /// link MTU minus IP and UDP headers (1472 for IPv4 on 1500-byte Ethernet).
    /// Must be at least 128; `poll_transmit` buffers must be at least this long.
    pub mtu: usize,
    /// Random 32-bit identity of this endpoint instance (non-zero). A peer that
    /// sees a new incarnation knows this endpoint restarted.
    pub incarnation: u32,
    /// Seed for the engine's generator (session ids).
    pub seed: u64,
    /// Most peers with state at once; datagrams opening more are dropped.
    pub max_peers: usize,
    /// Most send operations outstanding (posted, not completed): `fi_tx_attr::size`.
    pub tx_queue_len: usize,
    /// Most receive operations posted and not completed: `fi_rx_attr::size`.
    pub rx_queue_len: usize,
    /// Packets in flight per peer (sender) and accepted out of order (receiver), ≤ 4096.
    pub window: u16,
    /// Entropy values per session (PROTOCOL.md §4.6; the provider's
    /// `FI_XDP_PATHS`): the caller sends each datagram of a session from
    /// the source port of value [`Transmit::path`], which the engine picks
    /// in turn, passing over values that lost something lately. 1: every
    /// datagram says 0.
    pub paths: u16,
    /// Messages longer than this use rendezvous (RTS/CTS) instead of eager.
    pub eager_limit: usize,
    /// Bytes of unexpected eager message data the engine may buffer (a second copy).
    pub unexpected_budget: usize,
    /// Most unexpected messages (eager or rendezvous requests) queued at once.
    pub unexpected_max: usize,
    /// Bytes of out-of-order packets the engine may hold for reordering.
    pub reorder_budget: usize,
    /// Largest `inject` payload (`fi_tx_attr::inject_size`).
    pub inject_size: usize,
    /// Bytes of inject payload held until acknowledged, across all peers.
    pub inject_budget: usize,
    /// RTO before any RTT sample (RFC 6298 §2.1 says 1 s; a LAN wants less).
    pub rto_initial: Nanos,
    /// Lower bound of the RTO (RFC 6298 §2.4).
    pub rto_min: Nanos,
    /// Upper bound of the RTO after back-off (RFC 6298 §2.5).
    pub rto_max: Nanos,
    /// Timeouts of the same packet tolerated; one more fails the peer's operations.
    pub max_retries: u32,
    /// With authentication: how long a peer must have been silent (no
    /// datagram verified from it since an unanswered retransmission timeout,
    /// and two such timeouts at least) before an ICMP error about it is
    /// believed (PROTOCOL.md §11.7). A live peer's progress helper answers
    /// within milliseconds, so only a stopped or dead process stays silent
    /// this long; a forged ICMP message cannot end a session whose peer
    /// merely lost the CPU for a moment.
    pub icmp_silence: Nanos,
    /// Longest an acknowledgement is delayed. Zero: acknowledge with the next
    /// `poll_transmit` (once per batch of received datagrams).
    pub ack_delay: Nanos,
    /// Acknowledge at once after this many unacknowledged in-order packets.
    pub ack_every: u32,
    /// Acknowledge at once every in-order control packet and the last packet
    /// of every message whose sender waits for the ack to report a completion
    /// (flag AR); other packets wait for `ack_every` or `ack_delay`, or ride
    /// on the next packet we send. With manual progress an awaited ack must
    /// leave in the pass that received the packet (the application may stop
    /// calling once it has its completion), while the ack of an injected
    /// message (completed at the sender when it was copied) or of a segment
    /// in the middle of a message only costs the sender CPU: this keeps the
    /// first and cuts the others.
    pub ack_message_end_at_once: bool,
    /// Pack several whole small eager messages to one peer into one
    /// datagram when they wait together (PROTOCOL.md §6.8), if the peer
    /// said in its handshake that it accepts them.
    pub pack: bool,
    /// How long a sender waits after a receiver-not-ready refusal before retrying.
    pub rnr_delay: Nanos,
    /// A quiescent peer releases its queue storage after this long.
    pub idle_release: Nanos,
    /// Packet authentication with a key the job shares (PROTOCOL.md §11);
    /// `None`: datagrams carry a CRC-32C only, as without this field.
    pub auth: Option<AuthConfig>,
    /// Congestion control (PROTOCOL.md §12): a congestion window per peer
    /// that reacts to loss, ECN marks and delay, within the window the
    /// receiver grants. Off: `window` packets in flight, as granted.
    pub congestion: bool,
    /// Datagrams of the largest size this endpoint can absorb at once from
    /// all peers together (its receive ring). The window it grants each
    /// peer is this shared among the peers sending to it (§12.1). Zero: `window`.
    pub rx_capacity: usize,
    /// Bytes of unexpected eager data buffered for one peer; beyond it (or
    /// beyond `unexpected_budget` in total) a message's header is kept and
    /// its data fetched when a receive matches (§6.5).
    pub unexpected_peer_budget: usize,
    /// Most unexpected messages (buffered or header-only) from one peer.
    pub unexpected_peer_max: usize,
    /// Congestion control's delay signal: an RTT sample above
    /// `min_rtt + max(min_rtt, cc_delay_floor)` shrinks the window
    /// (PROTOCOL.md §12.2). Zero: no delay signal (loss and ECN only).
    pub cc_delay_floor: Nanos,
    /// A second UDP port of this endpoint that takes bulk datagrams, the
    /// segments of large transfers, through the kernel's receive offload
    /// (PROTOCOL.md §2.5); stated to peers in HELLO and HELLO_ACK (§4.1).
    /// Zero: none. The engine only states it: the caller chooses where
    /// each datagram goes ([`Engine::peer_bulk_port`]).
    ///
    /// [`Engine::peer_bulk_port`]: crate::Engine::peer_bulk_port
    pub bulk_port: u16,
    /// The caller finds each datagram's peer by the session it names
    /// ([`Engine::peer_of_session`], PROTOCOL.md §4.6), so peers may send a
    /// session's datagrams from any UDP source port; stated to them in
    /// HELLO and HELLO_ACK (feature ANY_PORT, §4.1). Off: the caller knows
    /// peers by source address, and peers send from theirs.
    ///
    /// [`Engine::peer_of_session`]: crate::Engine::peer_of_session
    pub any_port: bool,
}

/// Packet authentication (PROTOCOL.md §11).
#[derive(Clone)]
pub struct AuthConfig {
    /// The job key (libfabric `auth_key`, or the provider's key parameter):
    /// every endpoint of the job has the same. At least 16 bytes of secret.
    pub key: Vec<u8>,
    /// Encrypt DATA payloads too (flag ENC). With hardware AES-GCM this
    /// costs less than authenticating the payload alone (§11.3).
    pub encrypt: bool,
}

impl core::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("key", &format_args!("<{} bytes>", self.key.len()))
            .field("encrypt", &self.encrypt)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mtu: 1472,
            incarnation: 1,
            seed: 0,
            max_peers: 1 << 20,
            tx_queue_len: 4096,
            rx_queue_len: 4096,
            window: 256,
            paths: 1,
            eager_limit: 64 * 1024,
            unexpected_budget: 16 << 20,
            unexpected_max: 8192,
            reorder_budget: 8 << 20,
            inject_size: 1024,
            inject_budget: 4 << 20,
            rto_initial: Nanos::from_millis(20),
            rto_min: Nanos::from_millis(1),
            rto_max: Nanos::from_secs(1),
            max_retries: 12,
            icmp_silence: Nanos::from_secs(1),
            ack_delay: Nanos::from_micros(50),
            ack_every: 16,
            ack_message_end_at_once: false,
            pack: true,
            rnr_delay: Nanos::from_micros(500),
            idle_release: Nanos::from_secs(1),
            auth: None,
            congestion: true,
            rx_capacity: 0,
            unexpected_peer_budget: 4 << 20,
            unexpected_peer_max: 1 << 16,
            cc_delay_floor: Nanos::from_micros(100),
            bulk_port: 0,
            any_port: false,
        }
    }
}

/// Completion level a send asks for (`fi_tx_attr::op_flags`, fi_cq(3) "Completion semantics").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompletionLevel {
    /// FI_INJECT_COMPLETE: buffer reusable. For inject payloads the engine owns a
    /// copy and completes at post time; for caller buffers (which retransmission
    /// re-reads) it is upgraded to transmit-complete.
    Inject,
    /// FI_TRANSMIT_COMPLETE: every packet acknowledged by the peer.
    #[default]
    Transmit,
    /// FI_DELIVERY_COMPLETE: matched and placed at the target (DONE notice received).
    Delivery,
}

/// Where the payload of a send comes from.
#[derive(Clone, Copy, Debug)]
pub enum Payload<'a> {
    /// The caller's buffer of `len` bytes, read through [`SendBuffers::read`]
    /// with the op's token (at first transmission and every retransmission).
    /// It must stay valid until the send's completion event (fi_msg(3)).
    Buffer {
        /// Message length.
        len: usize,
    },
    /// Copied into engine storage now (fi_inject / FI_INJECT): at most
    /// [`Config::inject_size`] bytes, counted against [`Config::inject_budget`].
    Inject(&'a [u8]),
}

/// A send operation (fi_send, fi_senddata, fi_tsend, fi_inject, fi_sendmsg …).
#[derive(Clone, Copy, Debug)]
pub struct SendOp<'a, P> {
    /// Caller's identifier, unique among its outstanding sends; returned in the
    /// completion and passed to [`SendBuffers::read`].
    pub token: u64,
    /// Destination peer.
    pub dst: P,
    /// Payload.
    pub payload: Payload<'a>,
    /// `Some(tag)` for a tagged send.
    pub tag: Option<u64>,
    /// `Some(data)` to deliver remote CQ data (FI_REMOTE_CQ_DATA).
    pub data: Option<u64>,
    /// Completion level.
    pub level: CompletionLevel,
    /// FI_FENCE (fi_msg(3)): the message starts only once every operation
    /// posted before it to the same peer has completed (PROTOCOL.md §8.6).
    pub fence: bool,
}

/// Tag matching of a receive (fi_tagged(3)): matches a tagged message when
/// `(msg_tag | ignore) == (tag | ignore)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagMatch {
    /// Tag.
    pub tag: u64,
    /// Bits to ignore.
    pub ignore: u64,
}

impl TagMatch {
    /// Whether `msg_tag` matches.
    #[inline]
    pub fn matches(&self, msg_tag: u64) -> bool {
        (msg_tag | self.ignore) == (self.tag | self.ignore)
    }
}

/// A receive operation (fi_recv, fi_trecv, fi_recvmsg with FI_MULTI_RECV …).
#[derive(Clone, Copy, Debug)]
pub struct RecvOp<P> {
    /// Caller's identifier, unique among its posted receives; returned in
    /// completions and passed to [`RecvBuffers::write`].
    pub token: u64,
    /// Buffer length.
    pub len: usize,
    /// `Some(peer)`: only messages from that (known) peer (FI_DIRECTED_RECV);
    /// `None`: any source (FI_ADDR_UNSPEC).
    pub src: Option<P>,
    /// `Some` for a tagged receive (matches only tagged messages), `None` for untagged.
    pub tag: Option<TagMatch>,
    /// `Some(min_free)`: a FI_MULTI_RECV buffer released once less than `min_free`
    /// bytes remain (`FI_OPT_MIN_MULTI_RECV`).
    pub multi_recv: Option<usize>,
}

/// How a peek treats the message it finds (fi_tagged(3) FI_PEEK / FI_CLAIM / FI_DISCARD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeekMode {
    /// FI_PEEK: report, leave queued.
    Peek,
    /// FI_PEEK | FI_CLAIM: report and reserve it for a later [`crate::Engine::claim`] with `key`.
    Claim {
        /// The claim key (the provider uses the fi_context address).
        key: u64,
    },
    /// FI_PEEK | FI_DISCARD: report and drop it.
    Discard,
}

/// Completion flag bits (the provider maps them to FI_* values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u32);

impl Flags {
    /// FI_SEND.
    pub const SEND: Flags = Flags(1 << 0);
    /// FI_RECV.
    pub const RECV: Flags = Flags(1 << 1);
    /// FI_MSG.
    pub const MSG: Flags = Flags(1 << 2);
    /// FI_TAGGED.
    pub const TAGGED: Flags = Flags(1 << 3);
    /// FI_REMOTE_CQ_DATA: `data` is valid.
    pub const REMOTE_CQ_DATA: Flags = Flags(1 << 4);
    /// FI_MULTI_RECV: this completion releases the multi-recv buffer.
    pub const MULTI_RECV: Flags = Flags(1 << 5);
    /// Result of a peek (FI_PEEK).
    pub const PEEK: Flags = Flags(1 << 6);
    /// Result of a peek with claim (FI_CLAIM).
    pub const CLAIM: Flags = Flags(1 << 7);
    /// Result of a discard (FI_DISCARD).
    pub const DISCARD: Flags = Flags(1 << 8);
    /// FI_RMA: an RMA read or write (fi_rma(3)).
    pub const RMA: Flags = Flags(1 << 9);
    /// FI_ATOMIC: an atomic operation (fi_atomic(3)).
    pub const ATOMIC: Flags = Flags(1 << 10);
    /// FI_READ: an RMA read or a fetching atomic, at the initiator.
    pub const READ: Flags = Flags(1 << 11);
    /// FI_WRITE: an RMA write or a non-fetching atomic, at the initiator.
    pub const WRITE: Flags = Flags(1 << 12);
    /// FI_REMOTE_WRITE: at the target, a write carrying remote CQ data.
    pub const REMOTE_WRITE: Flags = Flags(1 << 13);

    /// Whether all bits of `o` are set.
    #[inline]
    pub fn contains(self, o: Flags) -> bool {
        self.0 & o.0 == o.0
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }
}

impl core::ops::BitOrAssign for Flags {
    fn bitor_assign(&mut self, o: Flags) {
        self.0 |= o.0;
    }
}

/// Why an operation failed (the provider maps to `fi_cq_err_entry::err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpError {
    /// FI_ETRUNC: the message was longer than the buffer; `olen` bytes were dropped.
    Truncated,
    /// FI_ECANCELED: cancelled by the caller.
    Canceled,
    /// FI_ENOMSG: a peek found no matching message.
    NoMessage,
    /// FI_EHOSTUNREACH / FI_ETIMEDOUT: retries exhausted, the peer does not answer.
    PeerUnreachable,
    /// FI_ECONNRESET: the peer restarted (new incarnation); in-flight work is lost.
    PeerRestarted,
    /// FI_ECONNABORTED: the peer dropped the session (same incarnation).
    PeerReset,
    /// FI_ECONNRESET: the peer closed its endpoint (it sent CLOSE); what it had
    /// not acknowledged by then will never be received.
    PeerClosed,
    /// The target refused an RMA or atomic operation, its memory untouched
    /// (fi_rma(3), fi_atomic(3)): no registration has the key.
    RemoteKey,
    /// … the range is not inside the registration.
    RemoteRange,
    /// … the registration does not grant the access.
    RemoteAccess,
    /// … the target cannot execute it (atomic operation or datatype).
    RemoteInvalid,
}

impl From<RmaStatus> for OpError {
    fn from(s: RmaStatus) -> OpError {
        match s {
            RmaStatus::UnknownKey => OpError::RemoteKey,
            RmaStatus::OutOfRange => OpError::RemoteRange,
            RmaStatus::NoAccess => OpError::RemoteAccess,
            RmaStatus::Invalid => OpError::RemoteInvalid,
        }
    }
}

/// A completion: everything an `fi_cq_*_entry` / `fi_cq_err_entry` needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion<P> {
    /// The operation's token.
    pub token: u64,
    /// FI_SEND/FI_RECV/FI_MSG/FI_TAGGED/FI_REMOTE_CQ_DATA/FI_MULTI_RECV …
    pub flags: Flags,
    /// Bytes transferred (received messages: bytes placed).
    pub len: usize,
    /// Offset in the receive buffer where the message starts (multi-recv).
    pub buf_offset: usize,
    /// Remote CQ data (valid with REMOTE_CQ_DATA).
    pub data: u64,
    /// Message tag (tagged receives).
    pub tag: u64,
    /// Source of a received message: the peer key given to `handle_datagram`.
    pub src: Option<P>,
    /// Error, if the operation failed.
    pub error: Option<OpError>,
    /// Overflow length for [`OpError::Truncated`].
    pub olen: usize,
}

/// Something the caller should know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<P> {
    /// An operation completed (successfully or not).
    Completion(Completion<P>),
    /// A peer's session was torn down (for logging); affected operations get error completions.
    PeerLost {
        /// The peer.
        peer: P,
        /// Why.
        reason: OpError,
    },
}

/// Why a post was refused (the provider maps to -FI_EAGAIN, -FI_EMSGSIZE, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PostError {
    /// Queue full ([`Config::tx_queue_len`]/[`Config::rx_queue_len`]) or inject
    /// storage used up: retry after progress (-FI_EAGAIN).
    QueueFull,
    /// Message longer than [`MAX_MSG_SIZE`] or inject longer than
    /// [`Config::inject_size`] (-FI_EMSGSIZE).
    TooLarge,
    /// Invalid argument (e.g. multi-recv with a zero-length buffer) (-FI_EINVAL).
    Invalid,
    /// Too many peers ([`Config::max_peers`]) (-FI_EAGAIN).
    TooManyPeers,
}

/// A datagram produced by `poll_transmit`: `len` bytes at the start of the
/// caller's buffer, to be sent to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Transmit<P> {
    /// Destination.
    pub dst: P,
    /// Datagram length.
    pub len: usize,
    /// The entropy value to send it by, below [`Config::paths`] (0 with one
    /// path, and for datagrams of no session). Handshakes carry the
    /// endpoint's address and leave from it whatever this says (§4.6).
    pub path: u16,
}

/// Gives the engine read access to send buffers (the single TX copy).
pub trait SendBuffers {
    /// Copy bytes `[offset, offset + dst.len())` of the message of send `token`
    /// into `dst`. The engine only asks for ranges inside the posted length.
    fn read(&mut self, token: u64, offset: usize, dst: &mut [u8]);

    /// RMA target: copy registered memory `[addr, addr + dst.len())` of
    /// registration `key` into `dst` (a read's response, at its first
    /// transmission and every retransmission). The engine asks only for
    /// ranges that [`RecvBuffers::rma_check`] accepted for reading. An error
    /// (the registration closed since, the memory unmapped) fails the read:
    /// the segment goes out with the status and no payload. Without
    /// registered memory: no such key.
    fn rma_read(&mut self, key: u64, addr: u64, dst: &mut [u8]) -> Result<(), RmaStatus> {
        let _ = (key, addr, dst);
        Err(RmaStatus::UnknownKey)
    }

    /// Single-copy rendezvous (PROTOCOL.md §6.7): write into `dst` what a
    /// receiver needs to copy the message of rendezvous send `token` out of
    /// this process itself (the "pull offer", opaque to the engine), and
    /// return its length; 0 (the default): no offer, the data goes through
    /// the link after a CTS. Asked at every (re)transmission of the
    /// request-to-send, so it must give the same answer each time. The
    /// buffer stays the caller's until the send's completion, as always.
    fn pull_offer(&mut self, token: u64, dst: &mut [u8]) -> usize {
        let _ = (token, dst);
        0
    }
}

/// Gives the engine write access to posted receive buffers (the single RX copy).
pub trait RecvBuffers {
    /// Copy `src` to bytes `[offset, offset + src.len())` of the buffer of receive
    /// `token`. The engine only writes inside the posted length.
    fn write(&mut self, token: u64, offset: usize, src: &[u8]);

    /// RMA target: may `len` bytes at `addr` of registration `key` be
    /// accessed with `access`? Asked once per operation (a write's first
    /// segment) before any byte is touched. Without registered memory: no
    /// such key.
    fn rma_check(
        &mut self,
        key: u64,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<(), RmaStatus> {
        let _ = (key, addr, len, access);
        Err(RmaStatus::UnknownKey)
    }

    /// RMA target: copy `src` to `addr` of registration `key` (a write's
    /// segment, inside a range [`RecvBuffers::rma_check`] accepted at the
    /// write's first segment: check that `key` still grants it). An error
    /// (the registration closed since, the memory not writable) fails the
    /// write: the initiator's completion reports it.
    fn rma_write(&mut self, key: u64, addr: u64, src: &[u8]) -> Result<(), RmaStatus> {
        let _ = (key, addr, src);
        Err(RmaStatus::UnknownKey)
    }

    /// RMA target: execute atomic `op` on `datatype` at `addr` of
    /// registration `key` with `operands` (then compare values), writing the
    /// old values into `result` when it is not empty (fetch). Checks key,
    /// range and access itself, and leaves memory untouched on error. Called
    /// exactly once per operation.
    fn rma_atomic(
        &mut self,
        key: u64,
        addr: u64,
        op: u8,
        datatype: u8,
        operands: &[u8],
        result: &mut [u8],
    ) -> Result<(), RmaStatus> {
        let _ = (key, addr, op, datatype, operands, result);
        Err(RmaStatus::UnknownKey)
    }

    /// RMA target: an operation on registration `key` completed with
    /// `access` (FI_RMA_EVENT counters: FI_REMOTE_READ / FI_REMOTE_WRITE).
    fn rma_remote_done(&mut self, key: u64, access: Access) {
        let _ = (key, access);
    }

    /// RMA initiator: `src` is bytes `[offset, offset + src.len())` of the
    /// result of RMA operation `token` (a read's data, an atomic's fetched
    /// values). The engine only writes inside the length posted.
    fn rma_result(&mut self, token: u64, offset: usize, src: &[u8]) {
        let _ = (token, offset, src);
    }

    /// Single-copy rendezvous (PROTOCOL.md §6.7): copy the first `len`
    /// bytes of the message that `offer` (a sender's
    /// [`SendBuffers::pull_offer`]) describes straight into bytes
    /// `[offset, offset + len)` of the buffer of receive `token`. True when
    /// every byte was copied; false (the default) for any failure — the
    /// engine then asks the sender for the data through the link (CTS), so
    /// bytes a failed pull wrote are overwritten and nothing is lost.
    fn pull(&mut self, token: u64, offset: usize, len: usize, offer: &[u8]) -> bool {
        let _ = (token, offset, len, offer);
        false
    }
}

/// A [`SendBuffers`]/[`RecvBuffers`] that has no buffers (for calls that
/// cannot touch any, e.g. when only inject sends are outstanding).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBuffers;

impl SendBuffers for NoBuffers {
    fn read(&mut self, _token: u64, _offset: usize, dst: &mut [u8]) {
        dst.fill(0);
    }
}

impl RecvBuffers for NoBuffers {
    fn write(&mut self, _token: u64, _offset: usize, _src: &[u8]) {}
}

/// Counters (monotonic) and gauges for statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams handed to `handle_datagram`.
    pub rx_datagrams: u64,
    /// Datagrams produced by `poll_transmit`.
    pub tx_datagrams: u64,
    /// Rejected by the decoder (bad CRC, truncated, malformed).
    pub corrupt: u64,
    /// Duplicate sequenced packets discarded.
    pub duplicates: u64,
    /// Valid packets dropped: wrong session, beyond window, no budget, unknown peer.
    pub dropped: u64,
    /// Packets retransmitted (all causes).
    pub retransmits: u64,
    /// Of which found lost by time before the retransmission timeout: a
    /// packet sent later was acknowledged and a reordering window passed
    /// (RACK, PROTOCOL.md §5.3).
    pub fast_retransmits: u64,
    /// Retransmission timeouts fired.
    pub timeouts: u64,
    /// Receiver-not-ready refusals sent.
    pub rnr_sent: u64,
    /// Receiver-not-ready refusals received.
    pub rnr_received: u64,
    /// RESET packets sent.
    pub resets_sent: u64,
    /// Peers whose session failed (unreachable, restarted, reset, closed).
    pub peers_lost: u64,
    /// CLOSE notices received from peers whose endpoint closed.
    pub closes_received: u64,
    /// Retransmission timeouts past the retry limit that did not fail the
    /// peer, because all that was outstanding to it was already reported
    /// complete (inject complete): giving up would lose it silently.
    pub patient_retries: u64,
    /// Authenticated-mode datagrams whose tag did not verify (forged,
    /// corrupted, or sealed with another key), dropped before use.
    pub auth_rejected: u64,
    /// Datagrams without an authentication trailer where one is required,
    /// or with one where no key is configured: dropped.
    pub unauthenticated: u64,
    /// Authenticated datagrams seen before (replays, network duplicates)
    /// or HELLOs older than the peer's last: dropped.
    pub replayed: u64,
    /// CHALLENGEs sent to make a HELLO prove it is fresh.
    pub challenges_sent: u64,
    /// Unexpected eager messages kept as a header only (over budget); their
    /// data is fetched when a receive matches.
    pub deferred: u64,
    /// Rendezvous messages the receiver copied itself from the sender's
    /// memory with its pull offer (§6.7).
    pub pulls: u64,
    /// Pull offers whose pull failed: those messages came through the
    /// link after a CTS instead.
    pub pull_fallbacks: u64,
    /// Data packets received with the ECN mark CE.
    pub ecn_marked: u64,
    /// Times a congestion window was reduced (loss, ECN, delay).
    pub cwnd_reductions: u64,
    /// Gauge: bytes of unexpected message data buffered now.
    pub unexpected_bytes: u64,
    /// Gauge: high-water mark of `unexpected_bytes`.
    pub unexpected_bytes_max: u64,
    /// Gauge: bytes of out-of-order packets held now.
    pub reorder_bytes: u64,
    /// PACK datagrams sent (§6.8), and the messages they carried.
    pub packs_sent: u64,
    pub packed_sent: u64,
    /// PACK datagrams received intact, and the records they carried.
    pub packs_received: u64,
    pub packed_received: u64,
}

//! Sharing the steering program between processes: a process that finds
//! our program already attached to an interface (by another process of the
//! same user: another rank of the job) takes the attaching `bpf_link` and
//! the program's maps by their kernel ids instead of failing with
//! [`BpfError::AlreadyAttached`]. Holding the link keeps the program
//! attached until the last process holding it exits (a `bpf_link` detaches
//! when its last file descriptor closes).
//!
//! Opening objects by id (`BPF_*_GET_FD_BY_ID`) needs `CAP_SYS_ADMIN`.
//! Only a program loaded by our own user is adopted: another user's ports
//! and sockets are not ours to steer.

use aya::maps::{Map, MapData};

use crate::inspect::{self, Hook};
use crate::{AttachMode, BpfError, COUNTER_COUNT, Steering, ifindex_of, map_error, sys};

impl Steering {
    /// The steering program another process of our user attached to
    /// `ifname`, with its maps and a hold on its `bpf_link`.
    pub fn adopt(ifname: &str) -> Result<Steering, BpfError> {
        let ifindex = ifindex_of(ifname)?;
        let refuse = |why: String| BpfError::NotAdoptable {
            ifname: ifname.to_owned(),
            why,
        };
        let attached = inspect::interfaces()?
            .into_iter()
            .find(|i| i.ifindex == ifindex)
            .and_then(|i| {
                i.programs
                    .into_iter()
                    .find(|(hook, _)| matches!(hook, Hook::Native | Hook::Generic))
            });
        let Some((hook, prog_id)) = attached else {
            return Err(refuse("no XDP program is attached any more".into()));
        };
        let mode = match hook {
            Hook::Native => AttachMode::Native,
            _ => AttachMode::Generic,
        };
        let program = inspect::program(prog_id)?
            .ok_or_else(|| refuse(format!("program {prog_id} is gone")))?;
        if !program.ours {
            return Err(refuse(format!(
                "program {prog_id} ({:?}) is not the ofi-xdp steering program (remove it with \
                 `ip link set dev {ifname} xdp off` if it is stale)",
                program.name
            )));
        }
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        if program.uid != Some(uid) {
            let by = program
                .uid
                .map_or("an unknown user".into(), |u| format!("user {u}"));
            return Err(refuse(format!(
                "program {prog_id} was loaded by {by}, not by us ({uid}): another user's \
                 endpoints hold the interface"
            )));
        }
        let link = inspect::xdp_links()?
            .into_iter()
            .find(|l| l.prog_id == prog_id && l.ifindex == ifindex)
            .ok_or_else(|| refuse(format!("program {prog_id} is not attached by a bpf_link")))?;
        let link = sys::link_fd_by_id(link.id).map_err(|source| BpfError::Syscall {
            what: "opening the steering program's bpf_link by id",
            source,
        })?;
        let map = |name: &'static str| -> Result<Map, BpfError> {
            let id = program
                .maps
                .iter()
                .find(|(_, n)| n == name)
                .map(|(id, _)| *id)
                .ok_or_else(|| refuse(format!("program {prog_id} has no map {name}")))?;
            let data = MapData::from_id(id).map_err(|e| map_error("opening a map by id", e))?;
            Map::from_map_data(data).map_err(|e| map_error("opening a map by id", e))
        };
        let open = |name: &'static str| map(name);
        let typed = |what: &'static str| move |e| map_error(what, e);
        let xsks = open("xsks")?.try_into().map_err(typed("the XSKMAP"))?;
        let xsk_queues = open("xsk_queues")?
            .try_into()
            .map_err(typed("the socket queue map"))?;
        let rx_queues = open("rx_queues")?
            .try_into()
            .map_err(typed("the per-queue counters"))?;
        let ports = open("ports")?.try_into().map_err(typed("the port map"))?;
        let counters: aya::maps::PerCpuArray<MapData, u64> = open("counters")?
            .try_into()
            .map_err(typed("the counters"))?;
        let config = open("config")?
            .try_into()
            .map_err(typed("the config map"))?;
        let rng = open("rng")?
            .try_into()
            .map_err(typed("the generator state"))?;
        let xsks: aya::maps::XskMap<MapData> = xsks;
        if xsks.len() != Steering::MAX_SLOTS || counters.len() != COUNTER_COUNT {
            return Err(refuse(format!(
                "program {prog_id} was built from another version of steer.bpf.c \
                 ({} XSKMAP slots, {} counters)",
                xsks.len(),
                counters.len()
            )));
        }
        Ok(Steering {
            link,
            xsks,
            xsk_queues,
            rx_queues,
            ports,
            counters,
            config,
            rng,
            ebpf: None,
            ifname: ifname.to_owned(),
            ifindex,
            mode,
        })
    }
}

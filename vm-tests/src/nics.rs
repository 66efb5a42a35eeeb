//! `--nic virtio`: the guest gets two virtio-net NICs with several queue pairs, joined on the
//! host through a bridge inside a network namespace this run creates (and deletes): the host's
//! own interfaces are never touched, and nothing the guest sends leaves that namespace.
//!
//! ```text
//!  guest: eth0 (virtio-net, 4 queue pairs) ── tap oxq0 ─┐
//!                                                        br0   (host netns oxvm-<pid>)
//!  guest: eth1 (virtio-net, 4 queue pairs) ── tap oxq1 ─┘
//! ```
//!
//! The taps are multi-queue (`ip tuntap … multi_queue`, one file descriptor per queue pair,
//! opened by QEMU with `queues=N`); `vhost=off` because the emulated device is what runs under
//! TCG anyway. The devices are modern-only (`disable-legacy=on`) with `iommu_platform=on`: a
//! virtio device without `VIRTIO_F_ACCESS_PLATFORM` bypasses the DMA API, and Linux's
//! virtio_net binds an AF_XDP pool for zero-copy only through it (`virtqueue_dma_dev()` is
//! NULL otherwise and the bind fails). Queue reset (`VIRTIO_F_RING_RESET`, which the driver
//! needs to swap a receive queue's buffers for the socket's) is on by default in QEMU 7.2.
//!
//! RSS is off (`rss=off`): with QEMU 7.2's `rss=on` (software RSS: "Can't load eBPF RSS")
//! a Debian 6.18 guest's NICs receive nothing at all — every `rxN_packets` stays 0 and a ping
//! between them fails — while a 6.12 guest on the same devices works. Without RSS the flows
//! still spread over the queues: the multi-queue tap (tun's flow steering) picks a queue per
//! flow by its hash, and QEMU delivers each tap queue to the virtqueue of the same index.

use std::process::Command;

use crate::util::{command_output, run_checked, which};

/// The kernel series `--nic virtio` boots unless told otherwise: Debian's first whose
/// virtio_net advertises AF_XDP zero-copy (`NETDEV_XDP_ACT_XSK_ZEROCOPY`, Linux 6.14; 6.12's
/// has the receive code but not the flag, and binds fail with EOPNOTSUPP).
pub const ZERO_COPY_SERIES: &str = "6.18";

/// Queue pairs of each NIC (the guest sets them all in use: `ethtool -L ethN combined 4`).
pub const QUEUES: u32 = 4;
/// MTU of the host side (bridge and taps): the largest the guest may use.
pub const HOST_MTU: u32 = 9000;
/// The guest's names for the two NICs (no udev in the guest: kernel names, in PCI order).
pub const GUEST_NICS: [&str; 2] = ["eth0", "eth1"];

/// The host side: a namespace with a bridge and two multi-queue taps. Deleted on drop.
pub struct HostNetwork {
    netns: String,
    taps: [String; 2],
}

fn ip(args: &[&str]) -> Result<(), String> {
    let ip = which("ip").ok_or("the host has no `ip` (iproute2)")?;
    run_checked(Command::new(ip).args(args))
}

impl HostNetwork {
    pub fn create() -> Result<HostNetwork, String> {
        let netns = format!("oxvm-{}", std::process::id());
        ip(&["netns", "add", &netns])?;
        let net = HostNetwork {
            netns,
            taps: ["oxq0".to_owned(), "oxq1".to_owned()],
        };
        let ns = net.netns.as_str();
        let mtu = HOST_MTU.to_string();
        ip(&[
            "-n", ns, "link", "add", "br0", "mtu", &mtu, "type", "bridge",
        ])?;
        for tap in &net.taps {
            ip(&[
                "-n",
                ns,
                "tuntap",
                "add",
                "dev",
                tap,
                "mode",
                "tap",
                "multi_queue",
            ])?;
            ip(&["-n", ns, "link", "set", "dev", tap, "mtu", &mtu])?;
            ip(&["-n", ns, "link", "set", "dev", tap, "master", "br0", "up"])?;
        }
        ip(&["-n", ns, "link", "set", "dev", "br0", "up"])?;
        Ok(net)
    }

    /// QEMU's arguments for the two NICs.
    pub fn qemu_args(&self) -> Vec<String> {
        let vectors = 2 * QUEUES + 2;
        let mut args = Vec::new();
        for (i, tap) in self.taps.iter().enumerate() {
            args.push("-netdev".to_owned());
            args.push(format!(
                "tap,id=nic{i},ifname={tap},script=no,downscript=no,queues={QUEUES},vhost=off"
            ));
            args.push("-device".to_owned());
            args.push(format!(
                "virtio-net-pci,netdev=nic{i},mac=52:54:00:0f:00:0{},mq=on,vectors={vectors},\
                 rss=off,disable-legacy=on,iommu_platform=on",
                i + 1
            ));
        }
        args
    }

    /// The command QEMU runs under: inside the namespace (QEMU opens the taps there).
    pub fn wrap(&self, qemu: &str) -> Command {
        let mut cmd = Command::new(which("ip").unwrap_or_else(|| "ip".into()));
        cmd.args(["netns", "exec", &self.netns, qemu]);
        cmd
    }

    /// One line about the host side, for the summary.
    pub fn describe(&self) -> String {
        let links = which("ip")
            .and_then(|ip| {
                command_output(Command::new(ip).args(["-n", &self.netns, "-br", "link"])).ok()
            })
            .unwrap_or_default();
        format!(
            "host netns {}: {}",
            self.netns,
            links.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    }
}

impl Drop for HostNetwork {
    fn drop(&mut self) {
        // Deleting the namespace deletes the bridge; the taps are persistent (made by `ip
        // tuntap`) and go with it once QEMU has closed them.
        if let Err(e) = ip(&["netns", "delete", &self.netns]) {
            eprintln!("vm-tests: could not delete {}: {e}", self.netns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_gets_two_multiqueue_nics_through_the_dma_api() {
        let net = HostNetwork {
            netns: "oxvm-test".into(),
            taps: ["oxq0".into(), "oxq1".into()],
        };
        let args = net.qemu_args().join(" ");
        assert!(args.contains("ifname=oxq0,script=no,downscript=no,queues=4,vhost=off"));
        assert!(args.contains("mq=on,vectors=10,rss=off,disable-legacy=on,iommu_platform=on"));
        assert_eq!(net.qemu_args().len(), 8);
        std::mem::forget(net); // nothing was created
    }
}

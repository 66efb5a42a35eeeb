//! A segment: several test hosts on one Ethernet bridge, as hosts on a
//! switch — for incasts (many senders, one receiver) and for an attacker on
//! the same segment as its victims.
//!
//! The bridge lives in its own namespace (`oxt-<pid>-<n>-s`); host `i` is
//! namespace `oxt-<pid>-<n>-h<i>` with veth `ox<pid>.<n><a+i>`, whose peer
//! `ox<pid>.<n><A+i>` is a port of the bridge. IPv4 `198.19.<x>.<i+1>/24`
//! (RFC 2544's range, as pairs), IPv6 `fd6f:6678:6471:<x>::<i+1>/64`.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::{
    Host, configure, delete_netns, ip, new_netns, next_ids, topology_mac, veth_to, wait_running,
};

/// The most hosts on one segment (one letter each in interface names).
pub const MAX_HOSTS: usize = 26;

/// Hosts on one bridge. Removed on drop.
#[derive(Debug)]
pub struct Segment {
    /// The hosts, in order.
    pub hosts: Vec<Host>,
    bridge_ns: String,
}

impl Segment {
    /// `n` hosts (at most `MAX_HOSTS`) on one bridge, links with MTU `mtu`.
    pub fn new(n: usize, mtu: u32) -> io::Result<Segment> {
        if n == 0 || n > MAX_HOSTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a segment has 1..={MAX_HOSTS} hosts, not {n}"),
            ));
        }
        let (pid, k) = next_ids();
        let x = (pid.wrapping_mul(31).wrapping_add(k) % 256) as u8;
        let mut seg = Segment {
            hosts: Vec::new(),
            bridge_ns: format!("oxt-{pid}-{k}-s"),
        };
        // From here on, Drop removes whatever exists.
        let mut created = vec![seg.bridge_ns.clone()];
        let r = (|| {
            new_netns(&seg.bridge_ns)?;
            let br = ["-n", seg.bridge_ns.as_str()];
            ip(&[
                br[0],
                br[1],
                "link",
                "add",
                "br0",
                "mtu",
                &mtu.to_string(),
                "type",
                "bridge",
            ])?;
            for i in 0..n {
                let ns = format!("oxt-{pid}-{k}-h{i}");
                new_netns(&ns)?;
                created.push(ns.clone());
                let letter = (b'a' + i as u8) as char;
                let mac = topology_mac((pid, k), x, 0x10, i);
                let (ifname, port) = veth_to((pid, k), letter, (&ns, &seg.bridge_ns), mac, mtu)?;
                ip(&[br[0], br[1], "link", "set", &port, "master", "br0", "up"])?;
                let v4 = Ipv4Addr::new(198, 19, x, i as u8 + 1);
                let v6 = Ipv6Addr::new(0xfd6f, 0x6678, 0x6471, u16::from(x), 0, 0, 0, i as u16 + 1);
                let host = Host::new(ns, ifname, (v4, v6), mac, mtu);
                configure(&host)?;
                seg.hosts.push(host);
            }
            ip(&[br[0], br[1], "link", "set", "br0", "up"])?;
            for h in &seg.hosts {
                wait_running(h)?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            delete_netns(&created);
            seg.hosts.clear();
            seg.bridge_ns.clear();
            return Err(e);
        }
        Ok(seg)
    }

    /// A raw socket on host `i`'s bridge port: it sees every frame to and
    /// from host `i` (a port mirror), and a frame sent through it reaches
    /// host `i` as if from the segment. The frames it sees are those a
    /// wire would carry: the port cuts the kernel's segmentation-offload
    /// batches (UDP `UDP_SEGMENT` sends, TCP) into frames of the MTU and
    /// completes their checksums before they pass the mirror, as a NIC
    /// would before they reach the switch (veth otherwise leaves both to
    /// an offload that never runs, and a copy of such a frame is dropped by
    /// the kernel it is sent to).
    pub fn tap(&self, i: usize) -> io::Result<crate::RawPort> {
        let letter = self.hosts.get(i).and_then(|h| h.ifname().chars().last());
        let Some(letter) = letter else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no such host"));
        };
        let base = self.hosts[i].ifname();
        let port = format!("{}{}", &base[..base.len() - 1], letter.to_ascii_uppercase());
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.bridge_ns, "ethtool", "-K", &port])
            .args(["tx", "off", "tx-udp-segmentation", "off", "tso", "off"])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "ethtool -K {port} tx off tx-udp-segmentation off tso off: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(crate::RawPort::open(&self.bridge_ns, &port)?.seeing_outgoing())
    }

    /// The bridge's namespace.
    pub fn bridge_netns(&self) -> &str {
        &self.bridge_ns
    }

    /// Names of every namespace of the segment, for checks that they are
    /// gone after drop.
    pub fn netns_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.hosts.iter().map(|h| h.netns().to_owned()).collect();
        v.push(self.bridge_ns.clone());
        v
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.bridge_ns.is_empty() {
            return;
        }
        delete_netns(&self.netns_names());
    }
}

//! Test hosts on two real NICs instead of a veth pair: with
//! [`NICS_ENV`]` = "eth0 eth1"` (two interfaces of the calling process's
//! namespace joined by a wire, a switch or a bridge), every [`HostPair`]
//! moves the first into its namespace `a` and the second into `b`,
//! addresses them as it would a veth pair, and moves them back when dropped.
//! The VM suite's `--nic` runs use it, so the end-to-end tests run unchanged
//! over virtio-net devices with several queues and AF_XDP zero-copy.
//!
//! The two NICs exist once, so pairs on them are taken one at a time: a
//! pair holds an exclusive `flock` on [`LOCK_FILE`] until dropped (a test
//! holding two pairs at once would wait for itself: run such tests on veth).
//! The queue count asked for is the NICs' own (set it with `ethtool -L`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use crate::{Addressing, Host, HostPair, Names, configure, ip, wait_running};

/// Names the two interfaces test hosts use instead of a veth pair,
/// separated by whitespace.
pub const NICS_ENV: &str = "OFI_XDP_TEST_NICS";

/// Held while a pair owns the NICs.
pub const LOCK_FILE: &str = "/run/ofi-xdp-testhosts-nics.lock";

/// The two NICs [`NICS_ENV`] names, if it is set.
pub fn from_env() -> Option<[String; 2]> {
    let v = std::env::var(NICS_ENV).ok()?;
    let mut names = v.split_whitespace().map(str::to_owned);
    Some([names.next()?, names.next()?])
}

/// A pair's hold on the NICs: moved back to the caller's namespace (the
/// one PID 1 has: where they were) and the lock released on drop.
#[derive(Debug)]
pub struct Lease {
    lock: File,
    moved: Vec<(String, String)>,
}

impl Lease {
    /// Moves the NICs back out of the pair's namespaces (before those go:
    /// a physical device in a deleted namespace returns to the initial one
    /// only later, from a work queue).
    pub fn release(&mut self) {
        for (nic, netns) in self.moved.drain(..) {
            if let Err(e) = ip(&["-n", &netns, "link", "set", "dev", &nic, "netns", "1"]) {
                eprintln!("testhosts: could not move {nic} back from {netns}: {e}");
            }
        }
        // SAFETY: flock on a file we own; unlocking cannot hurt.
        unsafe { libc::flock(self.lock.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn mac_of(nic: &str) -> io::Result<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{nic}/address"))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = text.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(io::Error::other(format!("{nic}: MAC {text:?} unreadable")));
    }
    for (b, p) in mac.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(io::Error::other)?;
    }
    Ok(mac)
}

/// `nic`, once it is in this namespace: a test killed while it held the
/// NICs leaves them in its namespaces, which [`crate::reap_stale`] deletes;
/// the kernel then returns a physical device to the initial namespace from
/// a work queue, a moment later. Waits up to 10 s for that, then looks in
/// our namespaces itself (a killed process whose namespaces are not reaped
/// yet).
fn come_home(nic: &str) -> io::Result<String> {
    let here = || std::path::Path::new("/sys/class/net").join(nic).exists();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !here() && std::time::Instant::now() < deadline {
        for ns in crate::our_netns() {
            let _ = ip(&["-n", &ns, "link", "set", "dev", nic, "netns", "1"]);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    if here() {
        Ok(nic.to_owned())
    } else {
        Err(io::Error::other(format!(
            "{nic} is not in this namespace, nor in ours"
        )))
    }
}

/// Waits until `a` gets an answer from `b` (a ping): a NIC's carrier comes
/// before the path through whatever joins the two passes frames (under
/// emulation it took seconds). Fills both neighbour tables on the way.
fn reachable(hosts: &[Host]) -> io::Result<()> {
    let [a, b] = hosts else {
        return Ok(());
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = a
            .command("ping")
            .args(["-c", "1", "-W", "1", &b.ipv4.to_string()])
            .output()?;
        if out.status.success() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "{} cannot reach {} over the NICs after 30 s",
                a.ifname, b.ipv4
            )));
        }
    }
}

/// A [`HostPair`] on `nics` with `mtu`.
pub fn pair(mtu: u32, nics: [String; 2]) -> io::Result<HostPair> {
    let lock = File::create(LOCK_FILE)?;
    // SAFETY: flock on a file we own; blocks until the previous pair is gone.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let pid = std::process::id();
    let n = crate::NEXT_PAIR.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        % crate::COUNTER_MODULUS;
    let names = Names::new(pid, n);
    let addr = Addressing::new(pid, n);
    let mut lease = Lease {
        lock,
        moved: Vec::new(),
    };
    let mut made = Vec::new();
    let built = (|| -> io::Result<HostPair> {
        let mut hosts = Vec::new();
        for (side, (nic, netns)) in nics
            .iter()
            .zip([&names.netns_a, &names.netns_b])
            .enumerate()
        {
            let mac = mac_of(&come_home(nic)?)?;
            crate::add_netns(netns)?;
            made.push(netns.clone());
            ip(&["link", "set", "dev", nic, "netns", netns])?;
            lease.moved.push((nic.clone(), netns.clone()));
            ip(&[
                "-n",
                netns,
                "link",
                "set",
                "dev",
                nic,
                "mtu",
                &mtu.to_string(),
            ])?;
            let host = Host {
                netns: netns.clone(),
                ifname: nic.clone(),
                ipv4: addr.ipv4(side as u32),
                ipv6: addr.ipv6(side as u32),
                mac,
                mtu,
                prefix4: Host::IPV4_PREFIX_LEN,
            };
            configure(&host)?;
            hosts.push(host);
        }
        for host in &hosts {
            wait_running(host)?;
        }
        reachable(&hosts)?;
        let b = hosts.pop().ok_or_else(|| io::Error::other("no host b"))?;
        let a = hosts.pop().ok_or_else(|| io::Error::other("no host a"))?;
        Ok(HostPair { a, b, nics: None })
    })();
    match built {
        Ok(mut p) => {
            p.nics = Some(lease);
            Ok(p)
        }
        Err(e) => {
            lease.release();
            for ns in made {
                let _ = ip(&["netns", "delete", &ns]);
            }
            Err(e)
        }
    }
}

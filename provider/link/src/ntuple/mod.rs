//! Per-port steering in the NIC: an ntuple (flow steering) rule sending UDP
//! to an endpoint's (IP, port) to the receive queue its AF_XDP socket is
//! bound to, so RSS never puts that endpoint's datagrams on another queue.
//! Drivers with such rules include mlx5, ice, i40e, ixgbe, bnxt and sfc
//! (`ethtool -K IF ntuple on`); veth and virtio_net have none and answer
//! `EOPNOTSUPP`.
//!
//! - `rxnfc.rs`: the ethtool structs and the rule's encoding;
//! - `table.rs`: a driver's rule table ([`RuleTable`]; [`Ethtool`] through
//!   `SIOCETHTOOL`), where a new rule goes;
//! - `record.rs`: who owns which rule ([`RuleRecord`] files), so rules of a
//!   process that died are found and removed ([`reap_stale`]).
//!
//! An [`InstalledRule`] removes its rule and record when dropped; a process
//! killed before that leaves both, and the next endpoint on the interface
//! (or `ofi-xdp cleanup`) removes them.

mod record;
mod rxnfc;
mod table;

use std::io;
use std::path::Path;

pub use record::{DEFAULT_DIR, RuleRecord};
pub use rxnfc::FlowRule;
pub use table::{Capacity, Ethtool, RuleTable, choose_location};

use rxnfc::RX_CLS_LOC_ANY;

/// A rule this process installed; removed (with its record) on drop.
pub struct InstalledRule {
    table: Ethtool,
    record: RuleRecord,
}

impl InstalledRule {
    /// The rule's place in the driver's table.
    pub fn location(&self) -> Option<u32> {
        self.record.location
    }

    pub fn rule(&self) -> FlowRule {
        self.record.rule
    }
}

impl Drop for InstalledRule {
    fn drop(&mut self) {
        let _ = remove_rule(&self.table, &self.record, &[]);
        let _ = self.record.remove();
    }
}

/// Installs `rule` on `ifname` (index `ifindex`, in the calling thread's
/// network namespace), recorded in `dir` first so that a process killed
/// right after the insertion still leaves a record naming it.
pub fn install(
    ifname: &str,
    ifindex: u32,
    rule: FlowRule,
    dir: &Path,
) -> io::Result<InstalledRule> {
    let table = Ethtool {
        ifname: ifname.to_owned(),
    };
    let record = install_in(&table, ifname, ifindex, rule, dir)?;
    Ok(InstalledRule { table, record })
}

/// [`install`] into any table; returns the rule's record, written.
fn install_in(
    table: &dyn RuleTable,
    ifname: &str,
    ifindex: u32,
    rule: FlowRule,
    dir: &Path,
) -> io::Result<RuleRecord> {
    let location = choose_location(table)?;
    let mut record = RuleRecord::ours(dir, ifname, ifindex, rule)?;
    record.location = (location != RX_CLS_LOC_ANY).then_some(location);
    record.write()?;
    match table.insert(&rule, location) {
        Ok(at) => {
            record.location = Some(at);
            if let Err(e) = record.write() {
                let _ = table.delete(at);
                let _ = record.remove();
                return Err(e);
            }
            Ok(record)
        }
        Err(e) => {
            let _ = record.remove();
            Err(e)
        }
    }
}

/// What happened to a stale record's rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reaped {
    /// The rule was still there and is removed.
    Removed { location: u32 },
    /// No rule of that shape was left (the driver or someone else removed
    /// it, or the interface was reset).
    AlreadyGone,
    /// The location now holds another rule: left alone.
    Replaced { location: u32 },
}

/// Removes `record`'s rule from `table` if the table still holds exactly
/// that rule, never touching the locations in `keep` (rules of live
/// records).
pub fn remove_rule(table: &dyn RuleTable, record: &RuleRecord, keep: &[u32]) -> io::Result<Reaped> {
    let candidates = match record.location {
        Some(l) => vec![l],
        // Killed while the driver picked a place: look for the rule itself.
        None => match table.locations() {
            Ok(l) => l,
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(Reaped::AlreadyGone),
            Err(e) => return Err(e),
        },
    };
    let mut outcome = Reaped::AlreadyGone;
    for location in candidates {
        if keep.contains(&location) {
            continue;
        }
        match table.get(location) {
            Ok(Some(r)) if r == record.rule => {
                table.delete(location)?;
                return Ok(Reaped::Removed { location });
            }
            Ok(_) if record.location.is_some() => outcome = Reaped::Replaced { location },
            Ok(_) => {}
            // No rule there (ENOENT, or EINVAL from drivers that check the
            // location against what is in use), or no rules at all any more
            // (EOPNOTSUPP: ntuple filtering turned off, which clears them).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::EINVAL | libc::EOPNOTSUPP)
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(outcome)
}

/// Removes what processes that are gone left on interface `ifindex` of the
/// network namespace `netns`: their rules (when the table still holds them)
/// and their records. Returns each stale record with what happened to its
/// rule (or why it could not be removed; the record then stays).
pub fn reap_stale(
    table: &dyn RuleTable,
    dir: &Path,
    netns: u64,
    ifindex: u32,
) -> Vec<(RuleRecord, io::Result<Reaped>)> {
    let here: Vec<RuleRecord> = RuleRecord::list(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|r| r.netns == netns && r.ifindex == ifindex)
        .collect();
    let keep: Vec<u32> = here
        .iter()
        .filter(|r| r.alive())
        .filter_map(|r| r.location)
        .collect();
    here.into_iter()
        .filter(|r| !r.alive())
        .map(|r| {
            let outcome = remove_rule(table, &r, &keep);
            if outcome.is_ok() {
                let _ = r.remove();
            }
            (r, outcome)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::table::memory::MemoryTable;
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ofi-xdp-reap-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn rule(port: u16, queue: u32) -> FlowRule {
        FlowRule {
            dst: std::net::SocketAddr::new([198, 18, 0, 1].into(), port),
            queue,
        }
    }

    /// A record as a killed process leaves it: its pid no longer runs.
    fn dead(dir: &Path, r: FlowRule, location: Option<u32>) -> RuleRecord {
        let mut rec = RuleRecord::ours(dir, "nic0", 7, r).unwrap();
        rec.pid = u32::MAX - 1; // beyond pid_max: no such process
        rec.location = location;
        rec.write().unwrap();
        rec
    }

    #[test]
    fn install_records_then_drop_removes_both() {
        let dir = temp_dir("install");
        let t = MemoryTable::new(16, false);
        let rec = install_in(&t, "nic0", 7, rule(5000, 3), &dir).unwrap();
        assert_eq!(rec.location, Some(15));
        assert_eq!(t.get(15).unwrap(), Some(rule(5000, 3)));
        let listed = RuleRecord::list(&dir);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].as_ref().unwrap().location, Some(15));
        assert_eq!(
            remove_rule(&t, &rec, &[]).unwrap(),
            Reaped::Removed { location: 15 }
        );
        rec.remove().unwrap();
        assert!(RuleRecord::list(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_insert_leaves_no_record() {
        let dir = temp_dir("fail");
        let t = MemoryTable::new(0, false);
        assert!(install_in(&t, "nic0", 7, rule(1, 1), &dir).is_err());
        assert!(RuleRecord::list(&dir).is_empty());
    }

    #[test]
    fn the_next_endpoint_removes_what_a_killed_one_left() {
        let dir = temp_dir("reap");
        let t = MemoryTable::new(16, false);
        let netns = ofi_xdp_epstats::netns_inode().unwrap();
        // A killed process's rule, recorded at its location.
        t.insert(&rule(5000, 1), 15).unwrap();
        let left = dead(&dir, rule(5000, 1), Some(15));
        // One killed while the driver was picking the location.
        t.insert(&rule(5001, 2), 3).unwrap();
        dead(&dir, rule(5001, 2), None);
        // A dead record whose location now holds someone else's rule.
        t.insert(&rule(6000, 0), 9).unwrap();
        dead(&dir, rule(5002, 2), Some(9));
        // A live endpoint's rule (this process), with the same shape as a
        // dead one's: never touched.
        let live = install_in(&t, "nic0", 7, rule(5001, 2), &dir).unwrap();
        // An administrator's rule: never touched.
        t.insert(&rule(7000, 0), 0).unwrap();

        let mut reaped = reap_stale(&t, &dir, netns, 7);
        reaped.sort_by_key(|(r, _)| r.rule.dst.port());
        let outcomes: Vec<Reaped> = reaped.into_iter().map(|(_, o)| o.unwrap()).collect();
        assert_eq!(
            outcomes,
            vec![
                Reaped::Removed { location: 15 },
                Reaped::Removed { location: 3 },
                Reaped::Replaced { location: 9 },
            ]
        );
        let rules = t.rules.borrow().clone();
        assert_eq!(rules.len(), 3, "{rules:?}");
        assert_eq!(rules.get(&9), Some(&rule(6000, 0)));
        assert_eq!(rules.get(&0), Some(&rule(7000, 0)));
        assert_eq!(rules.get(&live.location.unwrap()), Some(&rule(5001, 2)));
        let left_now: Vec<_> = RuleRecord::list(&dir)
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(left_now, vec![live.clone()], "only the live record stays");
        assert!(!left.file.exists());
        // Other interfaces and namespaces are not this call's business.
        dead(&dir, rule(8000, 1), Some(1));
        assert!(reap_stale(&t, &dir, netns, 8).is_empty());
        assert!(reap_stale(&t, &dir, netns + 1, 7).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
    /// A device whose ntuple filtering was turned off since (`ethtool -K
    /// … ntuple off` clears every rule): each query says EOPNOTSUPP.
    struct FilteringOff;

    impl RuleTable for FilteringOff {
        fn capacity(&self) -> io::Result<table::Capacity> {
            Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
        }
        fn locations(&self) -> io::Result<Vec<u32>> {
            Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
        }
        fn get(&self, _: u32) -> io::Result<Option<FlowRule>> {
            Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
        }
        fn insert(&self, _: &FlowRule, _: u32) -> io::Result<u32> {
            Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
        }
        fn delete(&self, _: u32) -> io::Result<()> {
            Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
        }
    }

    #[test]
    fn a_dead_rule_on_a_device_that_no_longer_filters_is_gone() {
        let dir = temp_dir("off");
        for location in [Some(15), None] {
            let rec = dead(&dir, rule(5000, 1), location);
            assert_eq!(
                remove_rule(&FilteringOff, &rec, &[]).unwrap(),
                Reaped::AlreadyGone
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! A driver's table of flow steering rules, through the ethtool ioctl
//! ([`Ethtool`]), behind the [`RuleTable`] trait so the bookkeeping above it
//! (which location, whose rule, what a dead process left) is exercised
//! without a NIC in the unit tests.

use std::io;

use super::rxnfc::{
    ETHTOOL_GRXCLSRLALL, ETHTOOL_GRXCLSRLCNT, ETHTOOL_GRXCLSRULE, ETHTOOL_SRXCLSRLDEL,
    ETHTOOL_SRXCLSRLINS, FlowRule, RULE_LOCS_OFFSET, RX_CLS_LOC_ANY, RX_CLS_LOC_SPECIAL, Rxnfc,
};
use crate::ethtool;

/// How many rules a driver's table holds and who picks their locations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Rules in the table now.
    pub rules: u32,
    /// Locations `0..size` (0 when the driver does not say).
    pub size: u32,
    /// The driver picks a location itself for `RX_CLS_LOC_ANY`.
    pub driver_picks: bool,
}

/// The rule table of one interface.
pub trait RuleTable {
    /// `ETHTOOL_GRXCLSRLCNT`.
    fn capacity(&self) -> io::Result<Capacity>;
    /// `ETHTOOL_GRXCLSRLALL`: every rule's location.
    fn locations(&self) -> io::Result<Vec<u32>>;
    /// `ETHTOOL_GRXCLSRULE`: the rule at `location` if it is UDP to one
    /// (IP, port) → a queue (`FlowRule::from_spec`), `None` for any other
    /// kind of rule.
    fn get(&self, location: u32) -> io::Result<Option<FlowRule>>;
    /// `ETHTOOL_SRXCLSRLINS` at `location` (or `RX_CLS_LOC_ANY`); returns
    /// the location the rule took.
    fn insert(&self, rule: &FlowRule, location: u32) -> io::Result<u32>;
    /// `ETHTOOL_SRXCLSRLDEL`.
    fn delete(&self, location: u32) -> io::Result<()>;
}

/// Where a new rule goes: `RX_CLS_LOC_ANY` when the driver picks, else
/// the highest free location — the lowest priority, as ethtool(8) itself
/// picks for `-N … loc` left out, so an administrator's rules keep
/// precedence.
pub fn choose_location(table: &dyn RuleTable) -> io::Result<u32> {
    let cap = table.capacity()?;
    if cap.driver_picks {
        return Ok(RX_CLS_LOC_ANY);
    }
    let used = table.locations()?;
    (0..cap.size)
        .rev()
        .find(|l| !used.contains(l))
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOSPC))
}

/// The rule table of an interface in the calling thread's network
/// namespace, through `SIOCETHTOOL`.
#[derive(Clone, Debug)]
pub struct Ethtool {
    pub ifname: String,
}

impl Ethtool {
    fn run(&self, c: &mut Rxnfc) -> io::Result<()> {
        // SAFETY: these commands read and write one struct ethtool_rxnfc
        // (GRXCLSRLALL, with its trailing array, goes through locations()).
        unsafe { ethtool::ioctl(&self.ifname, (c as *mut Rxnfc).cast()) }
    }
}

impl RuleTable for Ethtool {
    fn capacity(&self) -> io::Result<Capacity> {
        let mut c = Rxnfc {
            cmd: ETHTOOL_GRXCLSRLCNT,
            ..Rxnfc::default()
        };
        self.run(&mut c)?;
        Ok(Capacity {
            rules: c.rule_cnt,
            size: u32::try_from(c.data & !RX_CLS_LOC_SPECIAL).unwrap_or(u32::MAX),
            driver_picks: c.data & RX_CLS_LOC_SPECIAL != 0,
        })
    }

    fn locations(&self) -> io::Result<Vec<u32>> {
        let count = self.capacity()?.rules;
        if count == 0 {
            return Ok(Vec::new());
        }
        // struct ethtool_rxnfc followed by rule_cnt __u32s, in u64 words
        // so the struct's alignment holds.
        let bytes = RULE_LOCS_OFFSET + 4 * count as usize;
        let mut buf = vec![0u64; bytes.div_ceil(8).max(size_of::<Rxnfc>() / 8)];
        let head = Rxnfc {
            cmd: ETHTOOL_GRXCLSRLALL,
            rule_cnt: count,
            ..Rxnfc::default()
        };
        let base = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: buf holds at least size_of::<Rxnfc>() bytes, 8-aligned.
        unsafe { base.cast::<Rxnfc>().write(head) };
        // SAFETY: the buffer holds the struct and `count` locations, as
        // rule_cnt announces; the kernel writes no more than that.
        unsafe { ethtool::ioctl(&self.ifname, base.cast())? };
        // SAFETY: as above; the kernel rewrote rule_cnt with the number
        // of locations it filled in (at most the count we gave).
        let filled = unsafe { base.cast::<Rxnfc>().read() }.rule_cnt.min(count);
        // SAFETY: RULE_LOCS_OFFSET + 4 * filled <= the buffer's length.
        let locs =
            unsafe { std::slice::from_raw_parts(base.add(RULE_LOCS_OFFSET), 4 * filled as usize) };
        Ok(locs
            .chunks_exact(4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn get(&self, location: u32) -> io::Result<Option<FlowRule>> {
        let mut c = Rxnfc {
            cmd: ETHTOOL_GRXCLSRULE,
            ..Rxnfc::default()
        };
        c.fs.location = location;
        self.run(&mut c)?;
        Ok(FlowRule::from_spec(&c.fs))
    }

    fn insert(&self, rule: &FlowRule, location: u32) -> io::Result<u32> {
        let mut c = Rxnfc {
            cmd: ETHTOOL_SRXCLSRLINS,
            fs: rule.to_spec(location),
            ..Rxnfc::default()
        };
        self.run(&mut c)?;
        Ok(c.fs.location)
    }

    fn delete(&self, location: u32) -> io::Result<()> {
        let mut c = Rxnfc {
            cmd: ETHTOOL_SRXCLSRLDEL,
            ..Rxnfc::default()
        };
        c.fs.location = location;
        self.run(&mut c)
    }
}

#[cfg(test)]
pub(crate) mod memory {
    //! A rule table in memory, for the bookkeeping's unit tests: it keeps
    //! rules the way a driver with `size` locations does.

    use std::cell::RefCell;
    use std::collections::BTreeMap;

    use super::*;

    pub struct MemoryTable {
        pub size: u32,
        pub driver_picks: bool,
        pub rules: RefCell<BTreeMap<u32, FlowRule>>,
    }

    impl MemoryTable {
        pub fn new(size: u32, driver_picks: bool) -> MemoryTable {
            MemoryTable {
                size,
                driver_picks,
                rules: RefCell::new(BTreeMap::new()),
            }
        }
    }

    impl RuleTable for MemoryTable {
        fn capacity(&self) -> io::Result<Capacity> {
            Ok(Capacity {
                rules: self.rules.borrow().len() as u32,
                size: self.size,
                driver_picks: self.driver_picks,
            })
        }
        fn locations(&self) -> io::Result<Vec<u32>> {
            Ok(self.rules.borrow().keys().copied().collect())
        }
        fn get(&self, location: u32) -> io::Result<Option<FlowRule>> {
            match self.rules.borrow().get(&location) {
                Some(r) => Ok(Some(*r)),
                None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            }
        }
        fn insert(&self, rule: &FlowRule, location: u32) -> io::Result<u32> {
            let location = if location == RX_CLS_LOC_ANY {
                if !self.driver_picks {
                    return Err(io::Error::from_raw_os_error(libc::EINVAL));
                }
                (0..self.size)
                    .find(|l| !self.rules.borrow().contains_key(l))
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOSPC))?
            } else {
                location
            };
            if location >= self.size {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            self.rules.borrow_mut().insert(location, *rule);
            Ok(location)
        }
        fn delete(&self, location: u32) -> io::Result<()> {
            self.rules
                .borrow_mut()
                .remove(&location)
                .map(|_| ())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::memory::MemoryTable;
    use super::*;

    fn rule(port: u16, queue: u32) -> FlowRule {
        FlowRule {
            dst: std::net::SocketAddr::new([10, 0, 0, 1].into(), port),
            queue,
        }
    }

    #[test]
    fn highest_free_location_when_the_driver_does_not_pick() {
        let t = MemoryTable::new(8, false);
        assert_eq!(choose_location(&t).unwrap(), 7);
        t.insert(&rule(1, 1), 7).unwrap();
        t.insert(&rule(2, 1), 5).unwrap();
        assert_eq!(choose_location(&t).unwrap(), 6);
        t.insert(&rule(3, 1), 6).unwrap();
        assert_eq!(choose_location(&t).unwrap(), 4);
        for l in 0..=4 {
            t.insert(&rule(10 + l as u16, 0), l).unwrap();
        }
        assert_eq!(
            choose_location(&t).unwrap_err().raw_os_error(),
            Some(libc::ENOSPC)
        );
    }

    #[test]
    fn any_location_when_the_driver_picks() {
        let t = MemoryTable::new(8, true);
        assert_eq!(choose_location(&t).unwrap(), RX_CLS_LOC_ANY);
        assert_eq!(t.insert(&rule(1, 2), RX_CLS_LOC_ANY).unwrap(), 0);
    }

    #[test]
    fn a_device_without_rules_says_so() {
        // veth has no ethtool rxnfc operations at all.
        let t = Ethtool {
            ifname: "lo".into(),
        };
        let e = t.capacity().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
        let e = t.insert(&rule(1, 0), RX_CLS_LOC_ANY).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
    }
}

//! Which network namespaces still exist: a namespace lives while a task is
//! in it or a bind mount (`ip netns add` puts one in /run/netns) holds it,
//! and its identity is the inode of its nsfs file. Files in /dev/shm named
//! after a namespace that no longer exists can have no user left: the
//! namespace went with the last process that could have opened them.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::MetadataExt as _;

/// Directories where `ip netns` keeps its bind mounts.
const BIND_MOUNT_DIRS: [&str; 2] = ["/run/netns", "/var/run/netns"];

/// The inodes of the network namespaces of every task we may look at and
/// of every `ip netns` bind mount, or `None` when we may look at almost
/// none (not root): a partial answer would call live namespaces gone.
/// Tasks of a more privileged context (a container's init seen from
/// inside) stay unreadable even to root; a namespace only they hold looks
/// gone here, which is why a caller also asks whether a file's owner lives.
pub fn live_netns() -> Option<HashSet<u64>> {
    let mut live = HashSet::new();
    let (mut read, mut refused) = (0usize, 0usize);
    for proc_entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = proc_entry.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        // Threads can enter other namespaces (setns), so look at each task.
        let Ok(tasks) = std::fs::read_dir(proc_entry.path().join("task")) else {
            continue; // the process ended meanwhile
        };
        for task in tasks.flatten() {
            match std::fs::metadata(task.path().join("ns/net")) {
                Ok(m) => {
                    live.insert(m.ino());
                    read += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {} // ended meanwhile
                Err(_) => refused += 1,
            }
        }
    }
    if refused > read {
        return None;
    }
    for dir in BIND_MOUNT_DIRS {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            if let Ok(m) = std::fs::metadata(e.path()) {
                live.insert(m.ino());
            }
        }
    }
    Some(live)
}

/// The namespace inode a shared-memory area is named after
/// (`ofi-xdp-local-<netns>-<ip>-<port>`; group files: `Group::all_files`).
pub fn netns_of_area_name(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("ofi-xdp-local-")?;
    rest.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_namespace_is_live() {
        let ours = std::fs::metadata("/proc/self/ns/net").unwrap().ino();
        // Not root: None is the honest answer, and also fine here.
        if let Some(live) = live_netns() {
            assert!(live.contains(&ours));
        }
    }

    #[test]
    fn area_names_give_their_namespace() {
        assert_eq!(
            netns_of_area_name("ofi-xdp-local-4026532322-198.19.1.2-51286"),
            Some(4026532322)
        );
        assert_eq!(
            netns_of_area_name("ofi-xdp-umem-4026532322-4026531836-2-0-0"),
            None
        );
        assert_eq!(netns_of_area_name("ofi-xdp-local-x-1"), None);
        assert_eq!(netns_of_area_name("other-4026532322"), None);
    }
}

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::*;

/// A file `name` in a directory of this test's own (`done` removes it).
fn temp_path(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("ofi-xdp-group-test-{}-{name}", process::own_pid()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Removes the directory of `path` (made by [`temp_path`]).
fn done(path: &std::path::Path) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A geometry that says only how many members the group holds.
fn sized(members: u32) -> Geometry {
    Geometry {
        members,
        ..Geometry::default()
    }
}

fn member(pid: i32, port: u32) -> Member {
    Member {
        pid,
        xsk_fd: 3,
        umem_fd: 4,
        port,
        start_time: process::start_time(pid).unwrap_or(0),
    }
}

#[test]
fn file_is_private_and_shared_between_openers() {
    let path = temp_path("shared");
    let a = Group::open_path(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let b = Group::open_path(&path).unwrap();
    let g = Geometry {
        frame_size: 4096,
        frame_count: 6144,
        rx_frames: 2048,
        slot_chunks: 1,
        tx_per_member: 512,
        ring_size: 256,
        members: 8,
        ..Geometry::default()
    };
    {
        let mut l = a.lock().unwrap();
        assert!(!l.owner_died());
        l.reset(g);
        assert_eq!(l.add(member(process::own_pid(), 7)), Some(0));
        assert_eq!(l.add(member(process::own_pid(), 8)), Some(1));
    }
    let l = b.lock().unwrap();
    assert_eq!(l.geometry(), g);
    assert_eq!(l.live_member().map(|m| m.port), Some(7));
    assert_eq!(g.member_of_tx_slot(511), Some(0));
    assert_eq!(g.member_of_tx_slot(512), Some(1));
    assert_eq!(g.member_of_tx_slot(512 * 8), None);
    drop(l);
    // The free RX pool: what one member parks, another takes.
    assert!(a.lock().unwrap().park_rx(4096));
    assert!(a.lock().unwrap().park_rx(8192));
    assert_eq!(b.rx_pooled_hint(), 2);
    let mut l = b.lock().unwrap();
    assert_eq!(l.unpark_rx(), Some(8192));
    assert_eq!(l.unpark_rx(), Some(4096));
    assert_eq!(l.unpark_rx(), None);
    assert_eq!(l.rx_pool_room(), RX_POOL_CAP);
    drop(l);
    done(&path);
}

/// A group holds as many members as its creator chose, up to the table's
/// size, and its TX slots belong to those only.
#[test]
fn a_group_holds_the_members_its_creator_chose() {
    let path = temp_path("size");
    let g = Group::open_path(&path).unwrap();
    let me = process::own_pid();
    for want in [1, 3, DEFAULT_MEMBERS, MAX_MEMBERS as u32] {
        let mut l = g.lock().unwrap();
        l.reset(Geometry {
            tx_per_member: 16,
            ..sized(want)
        });
        for i in 0..want {
            assert_eq!(
                l.add(member(me, i)),
                Some(i as usize),
                "member {i} of {want}"
            );
        }
        assert_eq!(l.add(member(me, 999)), None, "a group of {want} is full");
        let geometry = l.geometry();
        assert_eq!(
            geometry.member_of_tx_slot(16 * want - 1),
            Some(want as usize - 1)
        );
        assert_eq!(geometry.member_of_tx_slot(16 * want), None);
        // One leaves: its entry is the next one taken.
        l.update(0, Member::default());
        assert_eq!(l.add(member(me, 1000)), Some(0));
    }
    done(&path);
}

#[test]
fn another_users_or_a_linked_file_is_refused() {
    let path = temp_path("mode");
    drop(Group::open_path(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Group::open_path(&path).err().unwrap();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    let link = temp_path("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let e = Group::open_path(&link).err().unwrap();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    done(&path);
    done(&link);
}

#[test]
fn a_dead_member_is_reclaimed_with_its_mailbox() {
    let path = temp_path("dead");
    let g = Group::open_path(&path).unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    {
        let mut l = g.lock().unwrap();
        l.reset(sized(2));
        assert_eq!(l.add(member(process::own_pid(), 1)), Some(0));
        assert_eq!(l.add(member(pid, 2)), Some(1));
        assert!(l.reclaim_dead(256).is_empty());
    }
    assert!(g.mailbox(1).post(4096));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut l = g.lock().unwrap();
    let gone = l.reclaim_dead(256);
    assert_eq!(gone.len(), 1);
    assert_eq!((gone[0].index, gone[0].member.port), (1, 2));
    assert_eq!(l.reclaim_counts(), (1, 256));
    assert!(g.mailbox(1).is_empty());
    // Its entry is free again; we are still there.
    assert_eq!(l.live_member().map(|m| m.port), Some(1));
    assert_eq!(l.add(member(process::own_pid(), 3)), Some(1));
    drop(l);
    assert!(!g.abandoned().unwrap());
    done(&path);
}

/// A holder killed while holding the lock does not hang the others: the
/// next lock says so, and the one after is clean.
#[test]
fn a_holder_dying_with_the_lock_is_survived() {
    let path = temp_path("robust");
    let g = Group::open_path(&path).unwrap();
    // SAFETY: the header is in our live mapping.
    let m = unsafe { std::ptr::addr_of_mut!((*g.header()).mutex) };
    // SAFETY: the child only locks the inherited shared mutex and exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: in the child: lock and die holding it.
        unsafe {
            libc::pthread_mutex_lock(m);
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let l = g.try_lock().unwrap();
    assert!(l.owner_died());
    // Taken: a second try finds it so (the data path skips a pass).
    std::thread::scope(|s| {
        s.spawn(|| assert!(g.try_lock().is_none()));
    });
    drop(l);
    assert!(!g.lock().unwrap().owner_died());
    done(&path);
}

#[test]
fn mailbox_posts_drains_and_refuses_when_full() {
    let mut mem = vec![0u64; (Mailbox::bytes(4) / 8) + 8];
    let p = mem.as_mut_ptr().cast::<u8>();
    // SAFETY: the buffer holds a 4-entry mailbox and outlives it (8-byte
    // alignment is enough for its atomics).
    let mb = unsafe { Mailbox::at(p, 4) };
    assert!(mb.is_empty());
    for a in 0..4 {
        assert!(mb.post(a * 4096));
    }
    assert!(!mb.post(99));
    let mut got = vec![];
    assert_eq!(mb.drain(|a| got.push(a)), 4);
    assert_eq!(got, vec![0, 4096, 8192, 12288]);
    assert!(mb.post(5));
    mb.reset();
    assert!(mb.is_empty());
}

#[test]
fn files_of_a_namespace_are_listed_and_a_dead_group_is_abandoned() {
    let path = temp_path("list");
    let dir = path.parent().unwrap().to_owned();
    let g = Group::open(&dir, 77, 3, 1).unwrap();
    drop(Group::open(&dir, 78, 3, 1).unwrap());
    assert_eq!(Group::files(&dir, 77), vec![g.path().to_owned()]);
    assert_eq!(Group::ifindex_queue(g.path()), Some((3, 1)));
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    g.lock().unwrap().reset(sized(1));
    g.lock().unwrap().add(member(child.id() as i32, 9));
    assert!(!g.abandoned().unwrap());
    let pid = child.id() as i32;
    assert_eq!(g.summary().unwrap().members, vec![(pid, true)]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(g.abandoned().unwrap());
    assert_eq!(g.summary().unwrap().members, vec![(pid, false)]);
    done(&path);
}

#[test]
fn kernel_releases_compare_by_major_and_minor() {
    assert_eq!(release_at_least("6.1.0-56-amd64", (6, 4)), Some(false));
    assert_eq!(release_at_least("6.4.0", (6, 4)), Some(true));
    assert_eq!(release_at_least("6.18.3+deb13-amd64\n", (6, 4)), Some(true));
    assert_eq!(release_at_least("5.15.0-1-generic", (6, 4)), Some(false));
    assert_eq!(release_at_least("garbage", (6, 4)), None);
}

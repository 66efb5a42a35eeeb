//! The guest's initramfs: a staging directory that mirrors the host paths of what the guest
//! needs (so absolute paths baked into test binaries, `CARGO_BIN_EXE_*` and library paths hold
//! unchanged inside the VM), written out as an uncompressed `newc` cpio archive.
//!
//! Uncompressed on purpose: under TCG, decompressing a gzip initramfs costs boot time, and
//! QEMU hands the archive over as guest memory either way.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::util::which;

/// How deep symlink chains are followed before giving up (a loop on the host).
const MAX_LINK_DEPTH: usize = 40;

pub struct Image {
    root: PathBuf,
    /// Every host file already mirrored, so libraries shared by many binaries are resolved once.
    mirrored: BTreeSet<PathBuf>,
    strip: Option<PathBuf>,
}

impl Image {
    /// Starts an empty staging tree at `root` (its old contents are removed).
    pub fn create(root: &Path) -> Result<Self, String> {
        if root.exists() {
            fs::remove_dir_all(root).map_err(|e| format!("removing {}: {e}", root.display()))?;
        }
        fs::create_dir_all(root).map_err(|e| format!("creating {}: {e}", root.display()))?;
        Ok(Self {
            root: root.to_owned(),
            mirrored: BTreeSet::new(),
            strip: which("objcopy"),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where guest path `guest` (absolute) lives in the staging tree.
    pub fn staged(&self, guest: &Path) -> PathBuf {
        let relative: PathBuf = guest
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        self.root.join(relative)
    }

    /// Creates directory `guest` in the image, mirroring any host symlinks on the way (Debian's
    /// merged `/usr`: `/lib -> usr/lib`, `/bin -> usr/bin`, `/var/run -> /run`).
    pub fn ensure_dir(&mut self, guest: &Path) -> Result<(), String> {
        self.ensure_dir_depth(guest, 0)
    }

    fn ensure_dir_depth(&mut self, guest: &Path, depth: usize) -> Result<(), String> {
        if depth > MAX_LINK_DEPTH {
            return Err(format!("symlink loop at {}", guest.display()));
        }
        let Some(parent) = guest.parent() else {
            return Ok(()); // the root
        };
        self.ensure_dir_depth(parent, depth + 1)?;
        let staged = self.staged_entry(guest)?;
        if staged.symlink_metadata().is_ok() {
            return Ok(());
        }
        match guest.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target =
                    fs::read_link(guest).map_err(|e| format!("{}: {e}", guest.display()))?;
                symlink(&target, &staged).map_err(|e| format!("{}: {e}", staged.display()))?;
                let resolved = parent.join(&target);
                self.ensure_dir_depth(&normalize(&resolved), depth + 1)
            }
            _ => fs::create_dir(&staged).map_err(|e| format!("{}: {e}", staged.display())),
        }
    }

    /// The staging path of `guest` with its parent directories resolved inside the image (an
    /// absolute symlink such as `/var/run -> /run` must not lead out to the host's `/run`).
    fn staged_entry(&self, guest: &Path) -> Result<PathBuf, String> {
        match (guest.parent(), guest.file_name()) {
            (Some(parent), Some(name)) => {
                Ok(self.staged(&self.resolve_in_image(parent)?).join(name))
            }
            _ => Ok(self.root.clone()),
        }
    }

    /// Copies host file `host` to the same path in the image (following and mirroring symlinks),
    /// stripping debug info from ELF files when `strip` (keeps symbols for backtraces).
    pub fn add_host_file(&mut self, host: &Path, strip: bool) -> Result<(), String> {
        self.add_host_file_depth(&normalize(host), strip, 0)
    }

    fn add_host_file_depth(
        &mut self,
        host: &Path,
        strip: bool,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_LINK_DEPTH {
            return Err(format!("symlink loop at {}", host.display()));
        }
        if !self.mirrored.insert(host.to_owned()) {
            return Ok(());
        }
        let parent = host
            .parent()
            .ok_or_else(|| format!("{} is not a file", host.display()))?;
        self.ensure_dir(parent)?;
        let staged = self.staged_entry(host)?;
        let meta = host
            .symlink_metadata()
            .map_err(|e| format!("{}: {e}", host.display()))?;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(host).map_err(|e| format!("{}: {e}", host.display()))?;
            if staged.symlink_metadata().is_err() {
                symlink(&target, &staged).map_err(|e| format!("{}: {e}", staged.display()))?;
            }
            return self.add_host_file_depth(&normalize(&parent.join(&target)), strip, depth + 1);
        }
        let real_staged = staged;
        match (&self.strip, strip) {
            (Some(objcopy), true) => {
                let status = Command::new(objcopy)
                    .arg("--strip-debug")
                    .arg(host)
                    .arg(&real_staged)
                    .status()
                    .map_err(|e| format!("objcopy {}: {e}", host.display()))?;
                if !status.success() {
                    copy(host, &real_staged)?;
                }
            }
            _ => copy(host, &real_staged)?,
        }
        Ok(())
    }

    /// The path directory `guest` ends up at once the image's symlinks are followed.
    fn resolve_in_image(&self, guest: &Path) -> Result<PathBuf, String> {
        let mut resolved = PathBuf::from("/");
        let components: Vec<_> = guest.components().collect();
        let mut hops = 0;
        let mut pending: Vec<PathBuf> = components
            .iter()
            .rev()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(PathBuf::from(n)),
                _ => None,
            })
            .collect();
        while let Some(name) = pending.pop() {
            let candidate = resolved.join(&name);
            let staged = self.staged(&candidate);
            match fs::read_link(&staged) {
                Ok(target) => {
                    hops += 1;
                    if hops > MAX_LINK_DEPTH {
                        return Err(format!("symlink loop resolving {}", guest.display()));
                    }
                    let next = normalize(&resolved.join(target));
                    resolved = PathBuf::from("/");
                    for c in next.components().rev() {
                        if let Component::Normal(n) = c {
                            pending.push(PathBuf::from(n));
                        }
                    }
                }
                _ => resolved = candidate,
            }
        }
        Ok(resolved)
    }

    /// Copies `host` and every shared library it loads (as `ldd` resolves them on the host).
    pub fn add_with_libraries(&mut self, host: &Path, strip: bool) -> Result<(), String> {
        self.add_host_file(host, strip)?;
        for lib in shared_libraries(host)? {
            self.add_host_file(&lib, false)?;
        }
        Ok(())
    }

    /// Writes a generated file at `guest` with permission bits `mode`.
    pub fn write_file(&mut self, guest: &Path, contents: &[u8], mode: u32) -> Result<(), String> {
        if let Some(parent) = guest.parent() {
            self.ensure_dir(parent)?;
        }
        let staged = self.staged_entry(guest)?;
        fs::write(&staged, contents).map_err(|e| format!("{}: {e}", staged.display()))?;
        fs::set_permissions(&staged, fs::Permissions::from_mode(mode))
            .map_err(|e| format!("{}: {e}", staged.display()))
    }

    /// Creates symlink `guest -> target` unless something already sits at `guest`.
    pub fn symlink(&mut self, guest: &Path, target: &Path) -> Result<(), String> {
        if let Some(parent) = guest.parent() {
            self.ensure_dir(parent)?;
        }
        let staged = self.staged_entry(guest)?;
        if staged.symlink_metadata().is_ok() {
            return Ok(());
        }
        symlink(target, &staged).map_err(|e| format!("{}: {e}", staged.display()))
    }

    /// Writes the staging tree as a `newc` archive, adding `/dev/console` and `/dev/null`
    /// device nodes (the kernel opens `/dev/console` for init before devtmpfs is mounted).
    pub fn write_cpio(&self, out: &Path) -> Result<u64, String> {
        let file = fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
        let mut cpio = Newc::new(BufWriter::new(file));
        let io = |e: io::Error| format!("{}: {e}", out.display());
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let mut entries: Vec<PathBuf> = fs::read_dir(&dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect();
            entries.sort();
            for path in entries.into_iter().rev() {
                let name = path
                    .strip_prefix(&self.root)
                    .map_err(|e| format!("{}: {e}", path.display()))?
                    .to_string_lossy()
                    .into_owned();
                let meta = path
                    .symlink_metadata()
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let mode = meta.permissions().mode() & 0o7777;
                if meta.file_type().is_symlink() {
                    let target = fs::read_link(&path).map_err(|e| format!("{e}"))?;
                    cpio.entry(
                        &name,
                        S_IFLNK | 0o777,
                        NO_RDEV,
                        target.to_string_lossy().as_bytes(),
                    )
                    .map_err(io)?;
                } else if meta.is_dir() {
                    cpio.entry(&name, S_IFDIR | mode, NO_RDEV, &[])
                        .map_err(io)?;
                    stack.push(path);
                } else {
                    let data = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    cpio.entry(&name, S_IFREG | mode, NO_RDEV, &data)
                        .map_err(io)?;
                }
            }
        }
        cpio.entry("dev/console", S_IFCHR | 0o600, (5, 1), &[])
            .map_err(io)?;
        cpio.entry("dev/null", S_IFCHR | 0o666, (1, 3), &[])
            .map_err(io)?;
        cpio.finish().map_err(io)
    }
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

/// Removes `.` and `..` lexically (symlinks in the path are mirrored separately).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// Libraries `ldd` resolves for `binary`, the dynamic loader included. A library that `ldd`
/// cannot find is an error naming it.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("cannot run ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // Static executables: ldd says so and exits non-zero.
        return Ok(Vec::new());
    }
    parse_ldd(&text).map_err(|missing| format!("{}: ldd cannot find {missing}", binary.display()))
}

/// Parses `ldd` output; `Err` names the libraries it could not find.
pub fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut libs = Vec::new();
    let mut missing = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    missing.push(name.trim().to_owned());
                    continue;
                }
                rest.split_whitespace().next()
            }
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    if missing.is_empty() {
        Ok(libs)
    } else {
        Err(missing.join(", "))
    }
}

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

/// No device number (for everything that is not a device node).
const NO_RDEV: (u32, u32) = (0, 0);

/// Writer for the "new ASCII" cpio format the kernel unpacks (Documentation/driver-api/
/// early-userspace/buffer-format.rst): a 110-byte hex header, the NUL-terminated name, the
/// data, each padded to 4 bytes; the archive ends with `TRAILER!!!`.
pub struct Newc<W: Write> {
    out: W,
    ino: u32,
    written: u64,
}

impl<W: Write> Newc<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            ino: 1,
            written: 0,
        }
    }

    pub fn entry(
        &mut self,
        name: &str,
        mode: u32,
        (rdev_major, rdev_minor): (u32, u32),
        data: &[u8],
    ) -> io::Result<()> {
        let nlink = if mode & 0o170_000 == S_IFDIR { 2 } else { 1 };
        let size = u32::try_from(data.len())
            .map_err(|_| io::Error::other(format!("{name}: larger than 4 GiB")))?;
        let name_len =
            u32::try_from(name.len() + 1).map_err(|_| io::Error::other("name too long"))?;
        let header = format!(
            "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
            self.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev_major, rdev_minor, name_len, 0
        );
        self.ino += 1;
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    /// Writes the trailer and flushes; returns the archive's size in bytes.
    pub fn finish(mut self) -> io::Result<u64> {
        self.entry("TRAILER!!!", 0, NO_RDEV, &[])?;
        self.out.flush()?;
        Ok(self.written)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let rem = (4 - self.written % 4) % 4;
        let zeros = [0u8; 3];
        let n = usize::try_from(rem).unwrap_or(0);
        self.put(&zeros[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
        assert_eq!(
            parse_ldd("\tlibfoo.so.1 => not found\n").unwrap_err(),
            "libfoo.so.1"
        );
    }

    #[test]
    fn newc_layout() {
        let mut buf = Vec::new();
        let mut w = Newc::new(&mut buf);
        w.entry("init", S_IFREG | 0o755, NO_RDEV, b"#!x\n").unwrap();
        let size = w.finish().unwrap();
        assert_eq!(size as usize, buf.len());
        assert_eq!(buf.len() % 4, 0);
        assert!(buf.starts_with(b"070701"));
        // Header is 110 bytes, then "init\0" padded to a multiple of 4 from the start.
        assert_eq!(&buf[110..115], b"init\0");
        assert_eq!(&buf[116..120], b"#!x\n");
        let text = String::from_utf8_lossy(&buf);
        assert!(text.contains("TRAILER!!!"));
        // mode field: 8 hex digits after magic + ino.
        assert_eq!(&text[14..22], "000081ED");
    }

    #[test]
    fn lexical_normalize() {
        assert_eq!(
            normalize(Path::new("/usr/lib/../lib64/x")),
            PathBuf::from("/usr/lib64/x")
        );
        assert_eq!(normalize(Path::new("/a/./b")), PathBuf::from("/a/b"));
    }

    #[test]
    fn mirrors_symlinked_dirs() {
        let tmp = std::env::temp_dir().join(format!("vmtests-image-{}", std::process::id()));
        let mut image = Image::create(&tmp).unwrap();
        // /bin is a symlink to usr/bin on merged-/usr Debian; either way the file lands.
        image.add_host_file(Path::new("/bin/sh"), false).unwrap();
        assert!(image.staged(Path::new("/bin/sh")).exists());
        image
            .write_file(Path::new("/bin/generated"), b"x", 0o644)
            .unwrap();
        assert!(image.staged(Path::new("/bin/generated")).exists());
        fs::remove_dir_all(&tmp).unwrap();
    }
}

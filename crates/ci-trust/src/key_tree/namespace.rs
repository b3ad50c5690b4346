//! The key tree mounted at the checkout's own path, for the build alone
//! (Linux): a private mount namespace and PID namespace entered between
//! `fork` and `exec` of the build's first process.
//!
//! In the child, before the build's program runs:
//! 1. `unshare(CLONE_NEWNS | CLONE_NEWPID)`, with `CLONE_NEWUSER` and a
//!    one-to-one map of this user when this process lacks `CAP_SYS_ADMIN`
//!    (unprivileged user namespaces, where the system allows them);
//! 2. every mount made private, so nothing propagates back;
//! 3. each output directory of the checkout the build writes to (its
//!    target directory, which a cache restores) bound from the checkout
//!    onto the same path in the tree, then the tree bound over the
//!    checkout's path: absolute paths, `file!()` and nextest's recorded
//!    workspace stay what they are, and the checkout itself is out of
//!    reach, by an absolute path, by `..` or through the working directory
//!    (entered again after the mount, and checked to be the tree's root);
//! 4. the runner's file-command files and the Docker socket covered (a
//!    daemon outside the namespace could read the checkout for the build);
//!    then every mount read-only but the tree, the directories bound
//!    through and the few places a build writes to outside them (the
//!    temporary directories, `$CARGO_HOME`, `/dev/shm`, the output
//!    directories outside the checkout): the build cannot write to the
//!    trusted checkout, the home directory or anything else the job uses
//!    later (`mount_setattr`, Linux 5.12; on an older kernel this step is
//!    skipped);
//! 5. a second fork: the build's program runs as process 1 of the new PID
//!    namespace, with a `/proc` of its own (no `/proc/<pid>/root` of a
//!    process outside leads back to the checkout), no capabilities and
//!    `no_new_privs` (no `sudo`, no file capabilities); when it exits,
//!    the kernel ends whatever it left running. The first child waits for
//!    it and exits with its status.
//!
//! Everything the child uses is prepared before the fork: between `fork`
//! and `exec` only system calls run (no allocation, no lock).
//! Must not: mount anything the build could use to reach the checkout, or
//! leave a mount outside the namespace.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// How the namespaces are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege {
    /// This process holds `CAP_SYS_ADMIN` (root, or `setcap` on the binary).
    CapSysAdmin,
    /// An unprivileged user namespace maps this user to itself.
    UserNamespace,
}

impl Privilege {
    pub fn describe(self) -> &'static str {
        match self {
            Privilege::CapSysAdmin => "CAP_SYS_ADMIN",
            Privilege::UserNamespace => "an unprivileged user namespace",
        }
    }
}

/// A path to cover in the namespace: a file with `/dev/null`, a directory
/// with an empty read-only tmpfs.
#[derive(Debug, Clone)]
struct Mask {
    path: CString,
    directory: bool,
}

/// The mounts of one build, prepared for the child.
#[derive(Debug, Clone)]
pub struct Isolation {
    privilege: Privilege,
    tree: CString,
    root: CString,
    cwd: CString,
    /// (directory of the checkout, the same path in the tree).
    binds: Vec<(CString, CString)>,
    /// Directories outside the checkout that stay writable.
    writable: Vec<CString>,
    masks: Vec<Mask>,
    /// `/proc/self/uid_map` and `gid_map` lines for a user namespace.
    uid_map: CString,
    gid_map: CString,
    /// The directory the child must see as its working directory after
    /// the mount, (device, inode), when the caller knows it: the
    /// workspace's tree as it was staged.
    cwd_identity: Option<(u64, u64)>,
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .with_context(|| format!("{} holds a NUL byte", path.display()))
}

/// Whether this process holds `CAP_SYS_ADMIN` (bit 21 of `CapEff`).
fn has_cap_sys_admin() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

impl Isolation {
    /// The mounts that put `tree` at `root` (the checkout's top directory)
    /// for a build started in `cwd` (`root` or below it), which must then
    /// be the directory `cwd_identity` names, with `write_through`
    /// (directories of the checkout the build writes to) bound from the
    /// checkout, and `writable` (directories outside it the build writes
    /// to) left writable besides the usual ones.
    pub fn new(
        privilege: Privilege,
        tree: &Path,
        root: &Path,
        cwd: &Path,
        cwd_identity: Option<(u64, u64)>,
        write_through: &[PathBuf],
        writable: &[PathBuf],
    ) -> Result<Isolation> {
        // The mount source must be the directory itself: never a symlink
        // an earlier build put at its path.
        let tree_meta = std::fs::symlink_metadata(tree)
            .with_context(|| format!("cannot read the key tree {}", tree.display()))?;
        if !tree_meta.is_dir() {
            bail!(
                "the key tree {} is no longer a directory (a build replaced it); nothing more is built",
                tree.display()
            );
        }
        let mut binds = Vec::new();
        let mut bound: Vec<PathBuf> = Vec::new();
        let mut dirs: Vec<&PathBuf> = write_through.iter().collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            let rel = dir.strip_prefix(root).with_context(|| {
                format!(
                    "{} is not inside the checkout {}",
                    dir.display(),
                    root.display()
                )
            })?;
            if rel.as_os_str().is_empty() {
                bail!(
                    "the build writes to the checkout's root itself ({}); give it a target directory of its own",
                    root.display()
                );
            }
            if bound.iter().any(|b| dir.starts_with(b)) {
                continue;
            }
            real_directory(root, rel, "the checkout")?;
            let mountpoint = real_directory(tree, rel, "the key tree")?;
            if std::fs::read_dir(&mountpoint)?.next().is_some() {
                bail!(
                    "the build's output directory {} holds key inputs in the key tree; give the build a target directory of its own",
                    dir.display()
                );
            }
            binds.push((c_path(dir)?, c_path(&mountpoint)?));
            bound.push(dir.clone());
        }
        let mut masks = Vec::new();
        for var in [
            "GITHUB_OUTPUT",
            "GITHUB_ENV",
            "GITHUB_PATH",
            "GITHUB_STATE",
            "GITHUB_STEP_SUMMARY",
        ] {
            if let Some(file) = std::env::var_os(var).map(PathBuf::from)
                && std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file())
            {
                masks.push(Mask {
                    path: c_path(&file)?,
                    directory: false,
                });
            }
        }
        if let Some(temp) = std::env::var_os("RUNNER_TEMP") {
            let commands = Path::new(&temp).join("_runner_file_commands");
            if std::fs::symlink_metadata(&commands).is_ok_and(|m| m.is_dir()) {
                masks.push(Mask {
                    path: c_path(&commands)?,
                    directory: true,
                });
            }
        }
        for socket in ["/var/run/docker.sock", "/run/docker.sock"] {
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket()) {
                masks.push(Mask {
                    path: c_path(Path::new(socket))?,
                    directory: false,
                });
            }
        }
        let mut open: Vec<PathBuf> = writable.to_vec();
        open.extend([
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
        ]);
        open.push(PathBuf::from("/dev/shm"));
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
        open.extend(cargo_home);
        let mut kept = Vec::new();
        for dir in open {
            // Their real paths (a mount onto a symlink would land where the
            // link points), outside the checkout (the checkout's are the
            // tree's, writable anyway), and never the whole file system.
            let Ok(real) = std::fs::canonicalize(&dir) else {
                continue;
            };
            if !real.is_dir()
                || real.starts_with(root)
                || real == Path::new("/")
                || kept.contains(&real)
            {
                continue;
            }
            kept.push(real);
        }
        kept.sort();
        let writable = kept.iter().map(|d| c_path(d)).collect::<Result<Vec<_>>>()?;
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Ok(Isolation {
            privilege,
            tree: c_path(tree)?,
            root: c_path(root)?,
            cwd: c_path(cwd)?,
            binds,
            writable,
            masks,
            uid_map: CString::new(format!("{uid} {uid} 1\n")).context("uid map")?,
            gid_map: CString::new(format!("{gid} {gid} 1\n")).context("gid map")?,
            cwd_identity,
        })
    }

    /// Makes `command` enter the namespaces before its program runs.
    pub fn apply(&self, command: &mut std::process::Command) {
        let isolation = self.clone();
        // SAFETY: the closure runs in the forked child; `enter` makes only
        // system calls on data prepared before the fork.
        unsafe {
            command.pre_exec(move || isolation.enter());
        }
    }

    /// Runs in the child between `fork` and `exec`.
    fn enter(&self) -> std::io::Result<()> {
        let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
        if self.privilege == Privilege::UserNamespace {
            flags |= libc::CLONE_NEWUSER;
        }
        // SAFETY: unshare takes flags only.
        check(unsafe { libc::unshare(flags) })?;
        if self.privilege == Privilege::UserNamespace {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", self.uid_map.as_bytes())?;
            write_file(c"/proc/self/gid_map", self.gid_map.as_bytes())?;
        }
        mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
        for (from, to) in &self.binds {
            mount(Some(from), to, None, libc::MS_BIND | libc::MS_REC, None)?;
        }
        mount(
            Some(&self.tree),
            &self.root,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )?;
        for mask in &self.masks {
            if mask.directory {
                mount(
                    Some(c"none"),
                    &mask.path,
                    Some(c"tmpfs"),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    Some(c"size=4k,mode=0555"),
                )?;
            } else {
                mount(Some(c"/dev/null"), &mask.path, None, libc::MS_BIND, None)?;
            }
        }
        // Nothing but the tree and the places a build writes to is writable.
        for dir in &self.writable {
            mount(Some(dir), dir, None, libc::MS_BIND | libc::MS_REC, None)?;
        }
        match set_read_only(c"/", true) {
            Ok(()) => {
                set_read_only(&self.root, false)?;
                for dir in &self.writable {
                    set_read_only(dir, false)?;
                }
            }
            // Linux before 5.12: no recursive attribute change.
            Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => {}
            Err(err) => return Err(err),
        }
        // The working directory was entered before the mount: it is still
        // the checkout's. Enter it again, through the tree.
        // SAFETY: chdir reads a NUL-terminated path.
        check(unsafe { libc::chdir(self.cwd.as_ptr()) })?;
        if let Some(identity) = self.cwd_identity {
            // SAFETY: stat writes into the zeroed struct we own.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            check(unsafe { libc::stat(c".".as_ptr(), &mut st) })?;
            #[allow(clippy::unnecessary_cast)]
            let seen = (st.st_dev as u64, st.st_ino as u64);
            if seen != identity {
                // Not the tree's root: the mount did not take. An errno
                // (no allocation between `fork` and `exec`): EXDEV.
                return Err(std::io::Error::from_raw_os_error(libc::EXDEV));
            }
        }
        // SAFETY: fork in a single-threaded child.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid > 0 {
            wait_and_exit(pid);
        }
        // Process 1 of the new PID namespace: ends with its parent.
        // SAFETY: prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })?;
        mount(
            Some(c"proc"),
            c"/proc",
            Some(c"proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        )?;
        drop_privileges()
    }
}

/// `dir` (relative) below `base`, made where missing, with no symlink and
/// no file on the way: a mount onto it lands where it says.
fn real_directory(base: &Path, rel: &Path, what: &str) -> Result<PathBuf> {
    let mut path = base.to_path_buf();
    for component in rel.components() {
        let std::path::Component::Normal(part) = component else {
            bail!(
                "the build's output directory {} is not a plain path below {what}",
                rel.display()
            );
        };
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => bail!(
                "{} in {what} is a symlink or a file, not a directory: the build's output directory cannot be mounted there; give the build a target directory of its own",
                escape(&path)
            ),
            Err(_) => std::fs::create_dir(&path)
                .with_context(|| format!("cannot create {}", escape(&path)))?,
        }
    }
    Ok(path)
}

fn escape(path: &Path) -> String {
    path.display().to_string().escape_debug().to_string()
}

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    data: Option<&std::ffi::CStr>,
) -> std::io::Result<()> {
    let ptr = |s: Option<&std::ffi::CStr>| s.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: every pointer is a NUL-terminated string or null, alive for
    // the call; the kernel only reads them.
    check(unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    })
}

/// Makes the mount at `path` and every mount below it read-only, or
/// writable again (`mount_setattr` with `AT_RECURSIVE`).
fn set_read_only(path: &std::ffi::CStr, read_only: bool) -> std::io::Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const AT_RECURSIVE: libc::c_int = 0x8000;
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the path is NUL-terminated and the struct ours, both alive
    // for the call; the kernel reads them only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            AT_RECURSIVE,
            &attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: open, write and close on a descriptor this function owns.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd)?;
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        if written < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The first child: waits for the build's process 1 and exits as it did.
/// Closes every descriptor first (it holds the parent's pipe that reports
/// a failed `exec`, which must close when the build's program starts).
fn wait_and_exit(pid: libc::pid_t) -> ! {
    // SAFETY: system calls only; `_exit` never returns.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..4096 {
                libc::close(fd);
            }
        }
        let mut status = 0;
        loop {
            let rc = libc::waitpid(pid, &mut status, 0);
            if rc == pid {
                break;
            }
            if rc < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(125);
            }
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        libc::_exit(128 + libc::WTERMSIG(status));
    }
}

/// The build runs without capabilities and cannot gain any (`sudo`, file
/// capabilities): it cannot undo the mounts or enter another namespace.
fn drop_privileges() -> std::io::Result<()> {
    // SAFETY: prctl and capset with integer arguments and structs we own.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        // Without CAP_SETPCAP (a binary given only CAP_SYS_ADMIN) the
        // bounding set cannot shrink; its exec drops every capability anyway.
        for cap in 0..64 {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether the namespaces can be made here, and how; otherwise why not.
/// A real attempt: a child enters them over an empty tree and runs `true`.
pub fn probe() -> std::result::Result<Privilege, String> {
    let privilege = if has_cap_sys_admin() {
        Privilege::CapSysAdmin
    } else {
        Privilege::UserNamespace
    };
    let attempt = || -> Result<()> {
        let scratch = tempfile::Builder::new()
            .prefix("ci-trust-key-tree-probe-")
            .tempdir()?;
        let (tree, root) = (scratch.path().join("tree"), scratch.path().join("root"));
        std::fs::create_dir(&tree)?;
        std::fs::create_dir(&root)?;
        let identity = {
            let meta = std::fs::metadata(&tree)?;
            (meta.dev(), meta.ino())
        };
        let isolation = Isolation::new(privilege, &tree, &root, &root, Some(identity), &[], &[])?;
        let mut command = std::process::Command::new("/bin/sh");
        command
            .args(["-c", "exit 0"])
            .current_dir(&root)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        isolation.apply(&mut command);
        let status = command.status().context("the child did not start")?;
        if !status.success() {
            bail!("the child exited with {status}");
        }
        Ok(())
    };
    match attempt() {
        Ok(()) => Ok(privilege),
        Err(err) => Err(match privilege {
            Privilege::CapSysAdmin => format!("a private mount namespace failed ({err:#})"),
            Privilege::UserNamespace => format!(
                "this process lacks CAP_SYS_ADMIN and an unprivileged user namespace failed ({err:#}); run as root, or give the binary the capability (`sudo setcap cap_sys_admin+ep BINARY`, as the workflows do)"
            ),
        }),
    }
}

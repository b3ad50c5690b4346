//! The fanotify backend of `verify-key --trace`: the kernel reports every
//! file of the repository opened or executed while the build runs, without
//! stopping the build's processes.
//!
//! This module owns the fanotify group (setting it up, marking the
//! repository's directories,
//! reading its events on a collector thread) and turning events into the
//! checker's terms ([`super::Analysis`]). It does not decide which files are
//! key inputs, run builds or parse strace logs.
//!
//! Compared with strace (see README, "What the trace proves"):
//! - it sees every open and exec the kernel performs, in every process,
//!   and names the file the kernel opened, so no path is resolved again
//!   after the fact;
//! - it marks inodes, not names: a repository file opened through a hard
//!   link or a bind mount, or moved out of the repository before or after
//!   it was opened, is named by its path when the watch started;
//! - it stops no process, so the build runs at nearly full speed;
//! - it does not see metadata calls (`stat`, `access`, `readlink`) nor which
//!   symlink a path went through: a repository symlink that is not a key
//!   input and leads to a file the build opened (inside the repository or
//!   out of it) is reported as "followed", whether or not the build went
//!   through it, and any other repository symlink that is not a key input
//!   as "maybe read" (its text may have been read with `readlink`; fail
//!   closed);
//! - it needs `CAP_SYS_ADMIN` (root on a hosted runner, not in most
//!   containers); without it the trace falls back to strace.
//!
//! Every process's opens count, not only those of the build's process tree:
//! a daemon the build started and that left the tree (double fork, an
//! `sccache` server) reads for the build all the same. A process that does
//! not descend from this one is named as such in the report, so that a
//! bystander (an editor scanning the checkout) is recognised. This
//! process's own opens count too once the build may run (gpu-archive packs
//! what the build left in its target directory, and a link planted there
//! leads to a repository file); its own walk of the repository is dropped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};

use super::{Analysis, Process, Scope, TraceMiss, TraceReport};

/// What the group asks the kernel to report: opens (of files and of
/// directories, which is how a listing starts) and executions.
const EVENTS: u64 =
    libc::FAN_OPEN | libc::FAN_OPEN_EXEC | libc::FAN_ONDIR | libc::FAN_EVENT_ON_CHILD;

/// What each repository file's own mark asks for: its opens and executions
/// under any name, in any directory (a hard link or a rename out of the
/// repository, a bind mount, a handle).
const FILE_EVENTS: u64 = libc::FAN_OPEN | libc::FAN_OPEN_EXEC;

/// An inode: device and inode number.
type Identity = (u64, u64);

/// What the watch knows from before the build: every marked repository
/// object by identity, with its name(s) then, and the repository symlinks
/// that resolve outside the repository.
#[derive(Debug, Default)]
struct Watched {
    names: HashMap<Identity, Vec<PathBuf>>,
    outside_links: Vec<OutsideLink>,
    /// Each directory's files (not subdirectories) when the watch started.
    files_in: HashMap<PathBuf, Vec<PathBuf>>,
    /// The mounts the repository is on (see [`repository_mounts`]).
    repository_mounts: HashSet<u64>,
    /// Files outside the repository whose opens are only counted: a key
    /// tree's manifest, which proves that the watch sees the build.
    control: HashSet<Identity>,
}

/// A repository symlink whose target is outside the repository.
#[derive(Debug)]
struct OutsideLink {
    link: PathBuf,
    target: PathBuf,
    identity: Identity,
}

/// One repository-relevant event, with what was known of its process when
/// it was read.
#[derive(Debug, Clone)]
pub struct Opened {
    pub path: PathBuf,
    pub pid: u32,
    pub executed: bool,
    pub directory: bool,
    /// Born after the watch started (unknown birth time: false).
    pub created: bool,
    /// `None` when the process was gone before it could be looked up.
    pub exe: Option<PathBuf>,
    /// Alive when looked up, and not started by this process.
    pub outside_tree: bool,
    pub cwd: Option<PathBuf>,
    pub crate_name: Option<String>,
    /// `path` is a repository symlink whose target outside the repository
    /// was opened.
    pub via_link: bool,
    /// The file was in the repository when the watch started (named by its
    /// path then): no file the build creates under that name exempts it.
    pub preexisting: bool,
    /// The process's program was born after the watch started (or its
    /// birth is unknown): the build made it, whatever it is called.
    pub exe_new: bool,
    /// Reached through a mount that is not the repository's.
    pub foreign_mount: bool,
}

/// What the collector returns: the events inside the repository, in order,
/// and how many events it read in all.
#[derive(Debug, Default)]
pub struct Collected {
    pub opened: Vec<Opened>,
    pub events: usize,
    /// Opens of the control files (see [`OpenWatch::start`]).
    pub control_events: usize,
    /// Each repository directory's files when the watch started: a listing
    /// read those names, even if the build removed some before the check.
    pub files_in: HashMap<PathBuf, Vec<PathBuf>>,
}

/// A running fanotify watch over the repository's directories.
pub struct OpenWatch {
    stop: Arc<AtomicBool>,
    collector: Option<JoinHandle<Result<Collected>>>,
}

impl OpenWatch {
    /// Whether this process may watch with fanotify: creating a group needs
    /// `CAP_SYS_ADMIN`. Creates and drops one group.
    pub fn available() -> bool {
        init_group().is_ok()
    }

    /// Starts watching every directory of `root` (see [`mark_directories`]),
    /// and counting the opens of `control` files (a build in the key tree
    /// opens the tree's manifest, not the checkout's: its opens show the
    /// watch sees the build).
    pub fn start(root: &Path, output_dirs: &[PathBuf], control: &[PathBuf]) -> Result<OpenWatch> {
        let group = init_group()?;
        let root = std::fs::canonicalize(root)
            .with_context(|| format!("cannot resolve {}", root.display()))?;
        let output_dirs: Vec<PathBuf> = output_dirs
            .iter()
            .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
            .collect();
        let mut watched = mark_repository(&group, &root, &output_dirs)?;
        watched.outside_links = outside_links(&root, &output_dirs)?;
        // Opens on the mounts of symlink targets outside the repository:
        // the link's text chose what the build read there.
        // Best effort: such a link that is not a key input is a miss
        // anyway ("maybe read"), and a target on a file system fanotify
        // cannot mark must not stop the trace.
        for link in &watched.outside_links {
            let _ = mark(
                &group,
                &link.target,
                libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
                libc::FAN_OPEN | libc::FAN_OPEN_EXEC | libc::FAN_ONDIR,
            );
        }
        watched.repository_mounts = repository_mounts(&root)?;
        for file in control {
            use std::os::unix::fs::MetadataExt;
            mark(
                &group,
                file,
                libc::FAN_MARK_ADD | libc::FAN_MARK_DONT_FOLLOW,
                FILE_EVENTS,
            )?;
            let metadata = std::fs::metadata(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            watched.control.insert((metadata.dev(), metadata.ino()));
        }
        // Executions on the mounts of the repository and of the output
        // directories (build scripts run from there): they name a process
        // that has exited by the time its reads are looked at.
        for dir in std::iter::once(&root).chain(&output_dirs) {
            let existing = dir
                .ancestors()
                .find(|d| d.is_dir())
                .unwrap_or(Path::new("/"));
            mark(
                &group,
                existing,
                libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
                libc::FAN_OPEN_EXEC,
            )?;
        }
        // The walks above opened every directory: those events are this
        // process's own, queued before the build starts. Dropped here, so
        // that from now on this process's opens count like the build's (it
        // packs what the build left in the target directory, which may be
        // a link to a repository file).
        drain(&group)?;
        become_subreaper()?;
        let stop = Arc::new(AtomicBool::new(false));
        let started = SystemTime::now();
        let collector = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("fanotify".to_owned())
                .spawn(move || collect(&group, &root, watched, started, &stop))
                .context("cannot start the fanotify collector thread")?
        };
        Ok(OpenWatch {
            stop,
            collector: Some(collector),
        })
    }

    /// Stops the watch once every event queued so far is read. Processes
    /// the build left running (daemons) are killed first: after the watch
    /// they would act unseen (read the repository, rewrite the build's
    /// output before it is packed or published).
    pub fn finish(mut self) -> Result<Collected> {
        let killed = kill_descendants()?;
        if !killed.is_empty() {
            eprintln!(
                "verify-key --trace: killed {} process(es) the build left running (pid {}): they would have acted after the trace",
                killed.len(),
                killed
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        self.stop.store(true, Ordering::SeqCst);
        let collector = self
            .collector
            .take()
            .context("the fanotify watch was already finished")?;
        let collected = collector
            .join()
            .map_err(|_| anyhow::anyhow!("the fanotify collector thread panicked"))??;
        Ok(collected)
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(collector) = self.collector.take() {
            let _ = collector.join();
        }
    }
}

/// Reads and drops every event queued so far.
fn drain(group: &File) -> Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    while wait_readable(group, 0)? {
        let mut reader = group;
        let len = match reader.read(&mut buffer) {
            Ok(len) => len,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err).context("cannot read fanotify events"),
        };
        let mut offset = 0;
        while offset + EVENT_HEADER <= len {
            // Parsing takes ownership of each event's descriptor, closing it.
            offset += parse_event(&buffer[offset..len])?.len;
        }
    }
    Ok(())
}

/// Makes this process the reaper of its orphaned descendants: a daemon the
/// build starts (double fork, `setsid`) stays under this process, so that
/// [`kill_descendants`] finds it.
#[allow(unsafe_code)]
pub(crate) fn become_subreaper() -> Result<()> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        bail!("cannot keep the build's daemons under the trace (PR_SET_CHILD_SUBREAPER): {err}");
    }
    Ok(())
}

/// Kills every live descendant of this process and reaps those that are
/// its children, until none is left; returns the pids killed.
#[allow(unsafe_code)]
pub(crate) fn kill_descendants() -> Result<Vec<u32>> {
    let own = std::process::id();
    let mut killed = Vec::new();
    for _ in 0..200 {
        let mut parents: HashMap<u32, u32> = HashMap::new();
        let mut dead: HashSet<u32> = HashSet::new();
        let entries = std::fs::read_dir("/proc").context("cannot list /proc")?;
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`: a zombie (state Z) is dead already,
            // unless only its main thread is: a process whose main thread
            // exited alone shows `Z` while its other threads run on.
            let Some(after_comm) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let mut fields = after_comm.split_whitespace();
            let state = fields.next().unwrap_or("");
            let Some(ppid) = fields.next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            // Every process is a link in the chain: the children of such a
            // process name it as their parent.
            parents.insert(pid, ppid);
            if (state == "Z" || state == "X") && !has_live_thread(pid) {
                dead.insert(pid);
            }
        }
        let live: Vec<u32> = parents
            .keys()
            .copied()
            .filter(|&pid| pid != own && !dead.contains(&pid) && descends_in(&parents, pid, own))
            .collect();
        // Reap the dead children (daemons reparented here included).
        loop {
            // SAFETY: waitpid with a null status pointer and WNOHANG.
            let reaped = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
            if reaped <= 0 {
                break;
            }
        }
        if live.is_empty() {
            return Ok(killed);
        }
        for pid in live {
            let Ok(raw) = libc::pid_t::try_from(pid) else {
                continue;
            };
            // SAFETY: kill takes two integers.
            unsafe { libc::kill(raw, libc::SIGKILL) };
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    bail!(
        "the build left processes running that could not be stopped (pid {}): they would act after the trace",
        killed
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Whether any thread of process `pid` is alive (its main thread can be a
/// zombie while the others run).
fn has_live_thread(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            stat.rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                .is_some_and(|state| state != "Z" && state != "X")
        })
    })
}

/// Whether `pid` descends from `ancestor` in the `parents` table.
fn descends_in(parents: &HashMap<u32, u32>, pid: u32, ancestor: u32) -> bool {
    let mut current = pid;
    for _ in 0..4096 {
        if current == ancestor {
            return true;
        }
        match parents.get(&current) {
            Some(&parent) if parent != current => current = parent,
            _ => return false,
        }
    }
    false
}

/// A notification-class group: events are queued, processes never wait for
/// us. The queue is unlimited so that no event is dropped (an overflow would
/// still be reported and fail the check).
#[allow(unsafe_code)]
fn init_group() -> Result<File> {
    let flags = libc::FAN_CLASS_NOTIF
        | libc::FAN_CLOEXEC
        | libc::FAN_UNLIMITED_QUEUE
        | libc::FAN_UNLIMITED_MARKS;
    let event_flags = libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC;
    let event_flags = u32::try_from(event_flags).context("fanotify event flags")?;
    // SAFETY: fanotify_init takes two integer flag sets and returns a new
    // descriptor or -1; it touches no memory of ours.
    let fd = unsafe { libc::fanotify_init(flags, event_flags) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        bail!(
            "fanotify is not available ({err}): it needs CAP_SYS_ADMIN (run the job as root, e.g. with sudo) and a Linux kernel with fanotify"
        );
    }
    // SAFETY: fd was just returned by fanotify_init and is owned by nobody else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Marks every directory of the repository, except `.git` and the build's
/// output directories, for [`EVENTS`] on itself and its children, and
/// every other file in them (symlinks aside) for [`FILE_EVENTS`]. Inode
/// marks rather than a mount mark: the kernel then reports the
/// repository's files only, not every file the toolchain opens. The marks
/// are on the inodes, not the names: a file the build hard-links or moves
/// out of the repository (or a directory it moves), then opens, is still
/// reported, and is named by what it was called when the watch started,
/// never by where it is when the event is read. A file the build creates
/// is reported while it is in a repository directory (and born after the
/// watch started: the build's own).
fn mark_repository(group: &File, root: &Path, output_dirs: &[PathBuf]) -> Result<Watched> {
    use std::os::unix::fs::MetadataExt;
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .filter_entry(|entry| {
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            !crate::key::is_git_metadata(&rel.to_string_lossy())
                && !output_dirs.iter().any(|d| d == entry.path())
        });
    let mut watched = Watched::default();
    let mut directories = 0;
    for entry in walk {
        let entry = entry.context("cannot walk the repository to watch it")?;
        let file_type = entry.file_type();
        if !file_type.is_dir()
            && let Some(dir) = entry.path().parent()
        {
            watched
                .files_in
                .entry(dir.to_path_buf())
                .or_default()
                .push(entry.path().to_path_buf());
        }
        if file_type.is_symlink() {
            continue;
        }
        if file_type.is_dir() {
            mark(
                group,
                entry.path(),
                libc::FAN_MARK_ADD | libc::FAN_MARK_ONLYDIR | libc::FAN_MARK_DONT_FOLLOW,
                EVENTS,
            )?;
            directories += 1;
        } else {
            mark(
                group,
                entry.path(),
                libc::FAN_MARK_ADD | libc::FAN_MARK_DONT_FOLLOW,
                FILE_EVENTS,
            )?;
        }
        let metadata = entry
            .metadata()
            .with_context(|| format!("cannot read {}", entry.path().display()))?;
        watched
            .names
            .entry((metadata.dev(), metadata.ino()))
            .or_default()
            .push(entry.path().to_path_buf());
    }
    if directories == 0 {
        bail!("{} has no directory to watch", root.display());
    }
    Ok(watched)
}

/// The repository symlinks (outside `.git` and the output directories)
/// that resolve outside the repository and the output directories.
fn outside_links(root: &Path, output_dirs: &[PathBuf]) -> Result<Vec<OutsideLink>> {
    use std::os::unix::fs::MetadataExt;
    let mut links = Vec::new();
    for (link, target) in symlinks_in(root, output_dirs)? {
        let Some(target) = target else {
            continue;
        };
        if target.starts_with(root) || output_dirs.iter().any(|d| target.starts_with(d)) {
            continue;
        }
        let Ok(metadata) = std::fs::metadata(&target) else {
            continue;
        };
        links.push(OutsideLink {
            link,
            target,
            identity: (metadata.dev(), metadata.ino()),
        });
    }
    Ok(links)
}

#[allow(unsafe_code)]
fn mark(group: &File, path: &Path, flags: libc::c_uint, events: u64) -> Result<()> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .with_context(|| format!("{} contains a NUL byte", path.display()))?;
    // SAFETY: the group descriptor is open for the call, c_path is a valid
    // NUL-terminated string that outlives it; the kernel only reads it.
    let rc = unsafe {
        libc::fanotify_mark(
            group.as_raw_fd(),
            flags,
            events,
            libc::AT_FDCWD,
            c_path.as_ptr(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        bail!("cannot watch {} with fanotify: {err}", path.display());
    }
    Ok(())
}

/// Reads events until `stop` is set and the queue is empty. Called on the
/// collector thread.
fn collect(
    group: &File,
    root: &Path,
    mut watched: Watched,
    started: SystemTime,
    stop: &AtomicBool,
) -> Result<Collected> {
    use std::os::unix::fs::MetadataExt;
    let mut collected = Collected::default();
    let mut processes = ProcessTable::new(started);
    let mut buffer = vec![0u8; 256 * 1024];
    let root_bytes = root.as_os_str().as_bytes().to_vec();
    loop {
        // The stop flag is read before the queue is drained: events of a
        // build that has exited were queued before its last open returned.
        let stopping = stop.load(Ordering::SeqCst);
        if !wait_readable(group, if stopping { 0 } else { 50 })? {
            if stopping {
                collected.files_in = std::mem::take(&mut watched.files_in);
                return Ok(collected);
            }
            continue;
        }
        let mut reader = group;
        let len = match reader.read(&mut buffer) {
            Ok(len) => len,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err).context("cannot read fanotify events"),
        };
        let mut offset = 0;
        while offset + EVENT_HEADER <= len {
            let event = parse_event(&buffer[offset..len])?;
            offset += event.len;
            collected.events += 1;
            if event.mask & libc::FAN_Q_OVERFLOW != 0 {
                bail!(
                    "the fanotify queue overflowed: events were lost, so the trace proves nothing; run the build again"
                );
            }
            let Some(fd) = event.fd else {
                continue;
            };
            let mount = mount_id(fd.as_raw_fd());
            let file = File::from(fd);
            // The name before the metadata: a name that says " (deleted)"
            // was unlinked before the link count is read.
            let name = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
            let metadata = file.metadata().ok();
            let identity = metadata.as_ref().map(|m| (m.dev(), m.ino()));
            if identity.is_some_and(|id| watched.control.contains(&id)) {
                collected.control_events += 1;
                continue;
            }
            let named = identity.and_then(|id| watched.names.get(&id));
            let path = match name {
                Ok(path) => strip_deleted(path, metadata.as_ref()),
                Err(_) if named.is_some() => PathBuf::new(),
                // Neither a repository file nor one whose name can be
                // known: nothing to check.
                Err(_) => continue,
            };
            let executed = event.mask & libc::FAN_OPEN_EXEC != 0;
            if executed {
                processes.executed(event.pid, &path);
            }
            // A repository file is named by its name(s) when the watch
            // started: it may have been opened through a hard link, a bind
            // mount or a handle, or moved before this event was read.
            // Anything else is named by where it is now, and counts if
            // that is in the repository or is the target of a repository
            // symlink that points outside.
            let bytes = path.as_os_str().as_bytes();
            let inside = bytes == root_bytes.as_slice()
                || (bytes.starts_with(&root_bytes) && bytes.get(root_bytes.len()) == Some(&b'/'));
            let mut names: Vec<(PathBuf, bool)> = match named {
                Some(names) => names.iter().map(|n| (n.clone(), false)).collect(),
                None => inside.then(|| (path.clone(), false)).into_iter().collect(),
            };
            // A repository file (or a path in the repository) opened on a
            // mount other than the repository's was reached through a mount
            // the build made (a bind mount, another mount namespace), under
            // whatever name it gave it.
            let opened = event.mask & libc::FAN_OPEN != 0;
            let foreign_mount = opened
                && !names.is_empty()
                && mount.is_none_or(|id| !watched.repository_mounts.contains(&id));
            for link in &watched.outside_links {
                if identity == Some(link.identity) || path.starts_with(&link.target) {
                    names.push((link.link.clone(), true));
                }
            }
            if names.is_empty() {
                continue;
            }
            let Some(info) = processes.lookup(event.pid) else {
                // A process that is not part of the build.
                continue;
            };
            // The opened inode itself says whether it is a directory (a
            // legacy group's events do not carry FAN_ONDIR) and when it was
            // born: a file born after the watch started is the build's own
            // output, even if it is gone by the time of the check.
            let directory = metadata.as_ref().is_some_and(std::fs::Metadata::is_dir);
            let created = named.is_none()
                && metadata
                    .and_then(|m| m.created().ok())
                    .is_some_and(|born| born > started);
            for (name, via_link) in names {
                collected.opened.push(Opened {
                    directory: directory && !via_link,
                    created: created && !via_link,
                    executed,
                    pid: event.pid,
                    exe: info.exe.clone(),
                    outside_tree: info.outside_tree,
                    cwd: info.cwd.clone(),
                    crate_name: info.crate_name.clone(),
                    exe_new: info.exe_new,
                    via_link,
                    preexisting: named.is_some() && !via_link,
                    foreign_mount: foreign_mount && !via_link,
                    path: name,
                });
            }
        }
        if offset != len {
            bail!("fanotify returned a truncated event ({len} bytes read, {offset} parsed)");
        }
    }
}

/// The mount a descriptor of this process is on (`mnt_id` of its fdinfo).
fn mount_id(fd: i32) -> Option<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("mnt_id:"))
        .and_then(|id| id.trim().parse().ok())
}

/// The mounts the repository is on: the one holding its root and every
/// mount below it, as they are when the watch starts.
fn repository_mounts(root: &Path) -> Result<HashSet<u64>> {
    let dir = File::open(root).with_context(|| format!("cannot open {}", root.display()))?;
    let mut mounts = HashSet::new();
    mounts.insert(
        mount_id(dir.as_raw_fd())
            .with_context(|| format!("cannot tell which mount {} is on", root.display()))?,
    );
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .context("cannot read /proc/self/mountinfo")?;
    for line in info.lines() {
        let mut fields = line.split(' ');
        let (Some(id), Some(point)) = (fields.next(), fields.nth(3)) else {
            continue;
        };
        // Mount points are written with octal escapes (`\040` for a space).
        let point = unescape_octal(point);
        if Path::new(&point).starts_with(root)
            && let Ok(id) = id.parse()
        {
            mounts.insert(id);
        }
    }
    Ok(mounts)
}

fn unescape_octal(field: &str) -> std::ffi::OsString {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(code) = field
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    std::ffi::OsString::from_vec(out)
}

/// The path of a file the build removed before its event was read: the
/// kernel appends " (deleted)" to the name of an unlinked file.
fn strip_deleted(path: PathBuf, metadata: Option<&std::fs::Metadata>) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let unlinked = metadata.is_some_and(|m| m.nlink() == 0);
    match path.as_os_str().as_bytes().strip_suffix(b" (deleted)") {
        Some(name) if unlinked => PathBuf::from(std::ffi::OsStr::from_bytes(name)),
        _ => path,
    }
}

/// `poll` on the group for up to `timeout_ms`; whether events are queued.
#[allow(unsafe_code)]
fn wait_readable(group: &File, timeout_ms: i32) -> Result<bool> {
    let mut poll = libc::pollfd {
        fd: group.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, valid for the call; the kernel writes `revents` only.
    let rc = unsafe { libc::poll(&mut poll, 1, timeout_ms) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(err).context("cannot poll the fanotify group");
    }
    Ok(rc > 0 && poll.revents & libc::POLLIN != 0)
}

/// `struct fanotify_event_metadata`: event_len u32, vers u8, reserved u8,
/// metadata_len u16, mask u64, fd i32, pid i32.
const EVENT_HEADER: usize = 24;

struct Event {
    len: usize,
    mask: u64,
    fd: Option<OwnedFd>,
    pid: u32,
}

#[allow(unsafe_code)]
fn parse_event(bytes: &[u8]) -> Result<Event> {
    let u32_at = |at: usize| -> u32 {
        let mut word = [0u8; 4];
        word.copy_from_slice(&bytes[at..at + 4]);
        u32::from_ne_bytes(word)
    };
    let len = usize::try_from(u32_at(0)).context("fanotify event length")?;
    let version = bytes[4];
    if version != libc::FANOTIFY_METADATA_VERSION {
        bail!(
            "fanotify event format version {version}, expected {}: this kernel is not supported",
            libc::FANOTIFY_METADATA_VERSION
        );
    }
    if len < EVENT_HEADER || len > bytes.len() {
        bail!(
            "a fanotify event of {len} bytes does not fit the {} bytes read",
            bytes.len()
        );
    }
    let mut mask = [0u8; 8];
    mask.copy_from_slice(&bytes[8..16]);
    let mask = u64::from_ne_bytes(mask);
    let raw_fd = i32::from_ne_bytes(u32_at(16).to_ne_bytes());
    let pid = u32_at(20);
    let fd = (raw_fd >= 0).then(|| {
        // SAFETY: the kernel opened this descriptor for us with the event;
        // nothing else owns it, and it is closed once, here.
        unsafe { OwnedFd::from_raw_fd(raw_fd) }
    });
    Ok(Event { len, mask, fd, pid })
}

/// What is known of a process.
#[derive(Debug, Clone, Default)]
struct ProcessInfo {
    exe: Option<PathBuf>,
    /// Not a descendant of this process (alive, and traced back elsewhere).
    outside_tree: bool,
    cwd: Option<PathBuf>,
    crate_name: Option<String>,
    /// See [`Opened::exe_new`].
    exe_new: bool,
}

/// Processes looked up once each: whether they descend from this process,
/// and what they run.
struct ProcessTable {
    own_pid: u32,
    started: SystemTime,
    /// `None`: not a descendant of this process (its events are dropped).
    known: HashMap<u32, Option<ProcessInfo>>,
    /// The last file each process executed, for processes gone before they
    /// could be looked up.
    executed: HashMap<u32, PathBuf>,
}

impl ProcessTable {
    fn new(started: SystemTime) -> Self {
        ProcessTable {
            own_pid: std::process::id(),
            started,
            known: HashMap::new(),
            executed: HashMap::new(),
        }
    }

    fn executed(&mut self, pid: u32, file: &Path) {
        // The dynamic loader is opened for execution after the program.
        let is_loader = file
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("ld-") && n.contains(".so"));
        if !is_loader {
            self.executed.insert(pid, file.to_path_buf());
            // A process that executes another program becomes it.
            if let Some(Some(info)) = self.known.get_mut(&pid) {
                *info = read_process(pid, self.started).unwrap_or_else(|| ProcessInfo {
                    exe_new: true,
                    ..ProcessInfo::default()
                });
            }
        }
    }

    /// The process, looked up once; this one included (see [`drain`]).
    fn lookup(&mut self, pid: u32) -> Option<ProcessInfo> {
        if let Some(known) = self.known.get(&pid) {
            return known.clone();
        }
        let mut info = read_process(pid, self.started).unwrap_or_else(|| ProcessInfo {
            exe: self.executed.get(&pid).cloned(),
            exe_new: true,
            ..ProcessInfo::default()
        });
        // Gone before it could be traced back: presumed the build's.
        info.outside_tree = descends_from(pid, self.own_pid) == Some(false);
        self.known.insert(pid, Some(info.clone()));
        Some(info)
    }
}

/// Whether `pid` descends from `ancestor`; `None` when the chain could not
/// be read to the end (a process on it exited).
fn descends_from(pid: u32, ancestor: u32) -> Option<bool> {
    let mut current = pid;
    for _ in 0..4096 {
        if current == ancestor {
            return Some(true);
        }
        if current <= 1 {
            return Some(false);
        }
        let stat = std::fs::read_to_string(format!("/proc/{current}/stat")).ok()?;
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let after_comm = &stat[stat.rfind(')')? + 1..];
        current = after_comm.split_whitespace().nth(1)?.parse().ok()?;
    }
    None
}

fn read_process(pid: u32, started: SystemTime) -> Option<ProcessInfo> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    // The program itself (even if removed since), not what its path names now.
    let exe_new = std::fs::metadata(format!("/proc/{pid}/exe"))
        .and_then(|m| m.created())
        .map_or(true, |born| born > started);
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let crate_name = args
        .iter()
        .position(|a| *a == b"--crate-name")
        .and_then(|i| args.get(i + 1))
        .map(|name| String::from_utf8_lossy(name).into_owned());
    Some(ProcessInfo {
        exe: Some(exe),
        cwd,
        crate_name,
        outside_tree: false,
        exe_new,
    })
}

/// Checks what the watch collected, as [`super::check`] checks a strace log.
/// In a key tree (`in_key_tree`) the watch is of the checkout the build
/// cannot see: no access to it is the good outcome, and the opens of the
/// tree's manifest show that the watch saw the build.
pub fn check(collected: &Collected, scope: &Scope, in_key_tree: bool) -> Result<TraceReport> {
    if in_key_tree && collected.control_events == 0 {
        bail!(
            "the fanotify watch saw no open of the key tree's manifest: it did not see the build, so it proves nothing"
        );
    }
    let mut analysis = Analysis::new(scope);
    analysis.checkout_unused_is_fine = in_key_tree;
    let mut processes: HashMap<u32, Rc<Process>> = HashMap::new();
    let mut foreign: Vec<(PathBuf, Rc<Process>)> = Vec::new();
    // Each file opened, and the first process that opened it.
    let mut opened_files: BTreeMap<PathBuf, Rc<Process>> = BTreeMap::new();
    for event in &collected.opened {
        let process = processes
            .entry(event.pid)
            .or_insert_with(|| {
                Rc::new(Process {
                    pid: event.pid,
                    exe: event.exe.clone().unwrap_or_else(|| PathBuf::from("?")),
                    outside_tree: event.outside_tree,
                    crate_name: event.crate_name.clone(),
                    start_dir: event
                        .cwd
                        .clone()
                        .unwrap_or_else(|| scope.start_dir.to_path_buf()),
                })
            })
            .clone();
        analysis.processes.insert(event.pid, process.clone());
        if event.exe_new {
            analysis
                .new_programs
                .insert(process.exe.clone().into_os_string());
        }
        if event.foreign_mount {
            foreign.push((event.path.clone(), process.clone()));
            continue;
        }
        if event.created {
            analysis.created.insert(event.path.clone().into_os_string());
        }
        if event.directory {
            if !analysis.metadata_exempt(&process) {
                analysis.listed.push((event.path.clone(), process.clone()));
                if event.preexisting {
                    for file in collected.files_in.get(&event.path).into_iter().flatten() {
                        analysis.use_file_as(file, "listed", &process, false);
                    }
                }
            }
            continue;
        }
        if event.via_link {
            analysis.use_file(&event.path, "followed", &process);
            continue;
        }
        opened_files
            .entry(event.path.clone())
            .or_insert_with(|| process.clone());
        let may_be_created = !event.preexisting;
        if event.executed {
            analysis.use_file_as(&event.path, "executed", &process, may_be_created);
        } else if !analysis.is_scan_rule(&event.path, &process) {
            analysis.use_file_as(&event.path, "read", &process, may_be_created);
        }
    }
    // fanotify names the file the kernel opened, not the symlinks on the
    // way: a repository symlink that is not a key input and leads to a file
    // the build opened may have chosen it.
    let links = symlinks_in(scope.root, scope.output_dirs)?;
    for (link, target) in &links {
        let Some(target) = target else {
            continue;
        };
        let opener = opened_files
            .range(target.clone()..)
            .next()
            .filter(|(file, _)| file.starts_with(target))
            .map(|(_, process)| process.clone());
        if let Some(process) = opener {
            analysis.use_file(link, "followed", &process);
        }
    }
    let mut report = analysis.finish(collected.events)?;
    for (path, process) in foreign {
        report.misses.push(super::TraceMiss {
            path: super::escape_controls(
                &path
                    .strip_prefix(scope.root)
                    .unwrap_or(&path)
                    .to_string_lossy(),
            ),
            access: "read through a mount the build made",
            process: process.describe(scope),
            fix: "a repository file was opened through a bind mount or another mount namespace, under a name that hides it; the build must not mount repository files (if a sandbox such as bubblewrap runs part of it, trace with --tracer strace)".to_owned(),
        });
    }
    report.recorded = "fanotify events";
    if in_key_tree {
        report.key_tree = Some(format!(
            "the build ran in the key tree: this watch is of the checkout, which the build cannot see ({} opens of the tree's manifest show it saw the build); any access to the checkout is listed here",
            collected.control_events
        ));
    }
    report.watched_repository_only = true;
    // fanotify does not see `readlink`: the text of a repository symlink
    // that is not a key input may have been read (a dangling link's text
    // is any bytes the checkout chose). Fail closed.
    let reported: HashSet<String> = report.misses.iter().map(|m| m.path.clone()).collect();
    for (link, _) in &links {
        let Ok(rel) = link.strip_prefix(scope.root) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if scope.inputs.contains(rel.as_str()) {
            continue;
        }
        let shown = super::escape_controls(&rel);
        if reported.contains(&shown) {
            continue;
        }
        report.repository_files += 1;
        report.misses.push(TraceMiss {
            fix: format!(
                "its text may have chosen what the build did: add key.include = [\"{shown}\"] to the policy so the key hashes the link, remove the link, or trace with --tracer strace, which sees readlink"
            ),
            path: shown,
            access: "a symlink maybe read",
            process: "any process: fanotify does not see readlink".to_owned(),
        });
    }
    report.misses.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report)
}

/// Every symlink in the repository outside the build output and `.git`,
/// with the file or directory it resolves to (wherever that is; `None`:
/// dangling).
fn symlinks_in(root: &Path, output_dirs: &[PathBuf]) -> Result<Vec<(PathBuf, Option<PathBuf>)>> {
    let mut links = Vec::new();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .filter_entry(|entry| {
            let path = entry.path();
            !output_dirs.iter().any(|d| path.starts_with(d))
                && path
                    .strip_prefix(root)
                    .is_ok_and(|rel| !crate::key::is_git_metadata(&rel.to_string_lossy()))
        });
    for entry in walk {
        let entry = entry.context("cannot walk the repository for symlinks")?;
        if !entry.path_is_symlink() {
            continue;
        }
        links.push((
            entry.path().to_path_buf(),
            std::fs::canonicalize(entry.path()).ok(),
        ));
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_octal(r"/a\040b\011c"), "/a b\tc");
        assert_eq!(unescape_octal("/plain"), "/plain");
        assert_eq!(unescape_octal(r"/trailing\04"), r"/trailing\04");
    }

    #[test]
    fn the_mount_of_a_descriptor_is_read_from_fdinfo() {
        let dir = File::open("/").unwrap();
        assert!(mount_id(dir.as_raw_fd()).is_some());
        assert_eq!(mount_id(-1), None);
        assert!(!repository_mounts(Path::new("/")).unwrap().is_empty());
    }

    #[test]
    fn a_short_or_foreign_event_is_an_error() {
        let mut bytes = vec![0u8; EVENT_HEADER];
        bytes[0..4].copy_from_slice(&u32::try_from(EVENT_HEADER).unwrap().to_ne_bytes());
        bytes[4] = libc::FANOTIFY_METADATA_VERSION + 1;
        assert!(parse_event(&bytes).is_err());
        bytes[4] = libc::FANOTIFY_METADATA_VERSION;
        bytes[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(parse_event(&bytes).is_err());
    }

    #[test]
    fn the_chain_of_this_process_descends_from_itself_not_from_a_sibling() {
        let me = std::process::id();
        assert_eq!(descends_from(me, me), Some(true));
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert_eq!(descends_from(child.id(), me), Some(true));
        // pid 1 is nobody's descendant but its own.
        assert_eq!(descends_from(1, me), Some(false));
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
    }
}

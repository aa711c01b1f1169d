//! What a trusted process does to itself so that the programs it confines cannot reach into it: it
//! is not dumpable (no `ptrace`, no `/proc/<pid>/mem` or `environ` for a process of the same user
//! without privileges), it forgets secrets from its own environment once read (the bytes
//! overwritten, so that `/proc/<pid>/environ` no longer holds them), and a program it starts outside
//! the gate leaves its controlling terminal. Also: a seccomp program loaded into the calling
//! process, for a trampoline that confines itself before `exec`.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

use crate::Instruction;

/// Makes this process non-dumpable: processes of the same user without `CAP_SYS_PTRACE` can no
/// longer trace it or read its memory and environment through `/proc`, and it leaves no core file.
/// Programs it starts become dumpable again at their `exec`.
pub fn not_dumpable() -> io::Result<()> {
    // SAFETY: a plain `prctl` on constants.
    let done = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Removes `names` from this process's environment and returns their values, overwriting each
/// value's bytes first: the strings the kernel placed at the start (which `/proc/<pid>/environ`
/// shows for as long as the process lives) no longer hold the secret.
///
/// Call it at the start of `main`, before any thread is started: the environment is process-wide
/// state that the C library does not lock.
pub fn take_env(names: &[&str]) -> Vec<(String, String)> {
    let mut taken = Vec::new();
    for name in names {
        let Ok(key) = CString::new(*name) else {
            continue;
        };
        while let Some(value) = wipe_first(&key) {
            if !taken.iter().any(|(k, _): &(String, String)| k == name) {
                taken.push(((*name).to_string(), value));
            }
        }
    }
    taken
}

/// Overwrites and removes the first `key=value` of the environment; returns the value.
fn wipe_first(key: &CStr) -> Option<String> {
    let key = key.to_bytes();
    // SAFETY: `environ` is the C library's list of `NAME=value` strings, ending with null; the
    // caller guarantees that no other thread reads or changes it meanwhile. The value's bytes are
    // overwritten in place (they stay within the string: up to its terminating NUL), then the C
    // library removes the entry.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = *entry;
            let bytes = CStr::from_ptr(text).to_bytes();
            if bytes.len() > key.len()
                && bytes.get(..key.len()) == Some(key)
                && bytes.get(key.len()) == Some(&b'=')
            {
                let value = String::from_utf8_lossy(bytes.get(key.len() + 1..)?).into_owned();
                let start = text.add(key.len() + 1);
                std::ptr::write_bytes(start, 0, bytes.len() - key.len() - 1);
                // The entry now reads `NAME=`; unsetenv removes it (and any later one of the name).
                let name = CString::new(key).ok()?;
                libc::unsetenv(name.as_ptr());
                return Some(value);
            }
            entry = entry.add(1);
        }
    }
    None
}

unsafe extern "C" {
    static mut environ: *const *mut libc::c_char;
}

/// Leaves the controlling terminal, if this process has one: a new session when it can make one
/// (it is not a process group's leader), otherwise `TIOCNOTTY` on `/dev/tty`. A program it then
/// `exec`s cannot open `/dev/tty` or queue keystrokes into the terminal.
pub fn leave_terminal() -> io::Result<()> {
    // SAFETY: plain system calls on constants and a descriptor of our own.
    unsafe {
        if libc::setsid() >= 0 {
            return Ok(());
        }
        let fd = libc::open(
            c"/dev/tty".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            // ENXIO: no controlling terminal, which is what is wanted.
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(libc::ENXIO | libc::ENOENT) => Ok(()),
                _ => Err(error),
            };
        }
        let done = libc::ioctl(fd, libc::TIOCNOTTY);
        let error = io::Error::last_os_error();
        libc::close(fd);
        if done == 0 { Ok(()) } else { Err(error) }
    }
}

/// For a process running as root: drops every capability, from the bounding set too, and locks
/// the securebits so that no `exec` gives them back (a confined root could otherwise make device
/// nodes, read physical memory, or undo its sandbox). Nothing to do for another user. False when a
/// step failed (`errno` says why).
///
/// Plain system calls on locals: callable in a child between `clone` and `exec`.
pub fn drop_root_capabilities() -> bool {
    const SECUREBITS: libc::c_ulong = 0b1100_1111; // NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each locked
    const VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: plain system calls on constants and locals.
    unsafe {
        if libc::geteuid() != 0 {
            return true;
        }
        if libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) != 0 {
            return false;
        }
        for cap in 0..64 {
            // Capabilities this kernel does not know are EINVAL: nothing to drop.
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        libc::syscall(libc::SYS_capset, &raw const header, none.as_ptr()) == 0
    }
}

/// Loads `program` as this process's seccomp filter (`no_new_privs` first, which it needs). For a
/// process about to `exec` the program to confine; children started through the gate load theirs
/// between `clone` and `exec` instead.
pub fn load_filter(program: &[Instruction]) -> io::Result<()> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "seccomp program too long"))?;
    if !drop_root_capabilities() {
        return Err(io::Error::last_os_error());
    }
    let fprog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut().cast(),
    };
    // SAFETY: `fprog` points to `program`, alive for the call; the kernel copies it.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &raw const fprog,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Puts this process in a mount namespace of its own in which every mount is read-only but
/// `writable` (each a bind of itself, as writable as it was): there, `chmod`, `chown`, `utimensat`
/// and extended attributes fail with `EROFS` outside those paths, which Landlock does not govern.
/// With `own_terminals`, `/dev/pts` is a new, empty instance: the user's terminals are not there.
/// As root, a mount namespace only (its mounts made private first, so that nothing propagates back);
/// otherwise a user namespace too, mapping this user and group to themselves. Returns whether a user
/// namespace was made.
///
/// The calling process must have one thread: the kernel refuses a new user namespace otherwise.
/// It is made dumpable for a user namespace (the kernel lets a process write its own maps only
/// then): call it in a process that holds no secret, before it `exec`s or only holds namespaces.
/// Paths in `writable` that do not exist are skipped.
pub fn private_mounts(writable: &[&Path], own_terminals: bool) -> io::Result<bool> {
    let paths: Vec<CString> = writable
        .iter()
        .filter(|p| p.exists())
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    // SAFETY: plain system calls on constants.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let user = uid != 0;
    // SAFETY: plain system calls on constants, locals and the strings above.
    unsafe {
        let flags = libc::CLONE_NEWNS | if user { libc::CLONE_NEWUSER } else { 0 };
        if user {
            // A non-dumpable process's /proc files are root's: it could not write its own maps.
            check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
        }
        check(libc::unshare(flags))?;
        if user {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", format!("{uid} {uid} 1").as_bytes())?;
            write_file(c"/proc/self/gid_map", format!("{gid} {gid} 1").as_bytes())?;
        }
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        // Copies of the writable paths, taken before everything is made read-only, put back after.
        let mut copies = Vec::with_capacity(paths.len());
        for path in &paths {
            let fd = libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                path.as_ptr(),
                OPEN_TREE_CLONE
                    | libc::AT_RECURSIVE as libc::c_uint
                    | libc::O_CLOEXEC as libc::c_uint,
            );
            copies.push((path, owned(fd)?));
        }
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        check_long(libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/".as_ptr(),
            libc::AT_RECURSIVE,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        ))?;
        for (path, copy) in &copies {
            check_long(libc::syscall(
                libc::SYS_move_mount,
                std::os::fd::AsRawFd::as_raw_fd(copy),
                c"".as_ptr(),
                libc::AT_FDCWD,
                path.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            ))?;
        }
        // With `own_terminals`, a new instance of /dev/pts: programs may still open terminals of
        // their own, but not see (nor read) the user's.
        if own_terminals && Path::new("/dev/pts").is_dir() {
            check(libc::mount(
                c"devpts".as_ptr(),
                c"/dev/pts".as_ptr(),
                c"devpts".as_ptr(),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
            ))?;
        }
    }
    // The working folder still names the mount it was entered on, now read-only: entered again by
    // its path, it is on the writable copy where there is one.
    if let Ok(cwd) = std::env::current_dir() {
        let _ = std::env::set_current_dir(cwd);
    }
    Ok(user)
}

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn check(result: libc::c_int) -> io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn check_long(result: libc::c_long) -> io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A descriptor a system call returned (or its error).
fn owned(fd: libc::c_long) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::last_os_error())?;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just gave this process, owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Writes `bytes` to the file at `path` in one write.
fn write_file(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: plain system calls on the path, the bytes and a descriptor of our own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if usize::try_from(written).ok() == Some(bytes.len()) {
            Ok(())
        } else {
            Err(error)
        }
    }
}

/// Makes this process dumpable again (a namespace holder whose namespaces its parent opens through
/// `/proc/<pid>/ns`).
pub fn dumpable() -> io::Result<()> {
    // SAFETY: a plain `prctl` on constants.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_taken_variable_is_gone_from_the_environment_and_its_bytes_overwritten() {
        // The test's own process: the variable is set and read here only.
        let name = "PROCESS_GATE_TAKE_ENV_TEST";
        // SAFETY (test): no other test touches this variable.
        unsafe { std::env::set_var(name, "s3cret-value") };
        let taken = super::take_env(&[name, "PROCESS_GATE_NOT_SET"]);
        assert_eq!(taken, vec![(name.to_string(), "s3cret-value".to_string())]);
        assert!(std::env::var(name).is_err());
        assert!(super::take_env(&[name]).is_empty());
    }
}

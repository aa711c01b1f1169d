//! The seccomp program of a confined process, written here instruction by instruction (classic BPF
//! over `struct seccomp_data`): short enough to read whole, and it refuses what a generic filter
//! builder lets through (system call numbers of the x32 ABI, which reach the same kernel code
//! under other numbers).
//!
//! It refuses, with `EACCES`:
//! - reaching into other processes: `ptrace`, `process_vm_readv`/`writev`, `pidfd_getfd`;
//! - queueing input into a terminal: `ioctl` `TIOCSTI` and `TIOCLINUX`;
//! - changing the mounts it sees (which could undo a read-only path) or joining namespaces
//!   (`unshare`, `setns`), and the kernel itself: the mount calls, modules, `kexec`, `reboot`,
//!   `bpf`, `perf_event_open`, `userfaultfd`, `iopl`/`ioperm`; the user's keyrings; files by
//!   handle (`open_by_handle_at`), which pass every path rule;
//! - `ioctl` `TIOCSCTTY`, `TIOCCONS`, `TIOCSETD`: taking a terminal, the console;
//! - with the network off: `socket` of any family (Unix sockets too: a pathname or abstract socket
//!   may be a server outside the run, a session host or a database), `io_uring_setup`, and
//!   `socketpair` of datagram sockets (which can `sendto` any named socket). A stream
//!   `socketpair` stays: its two ends are the process's own.
//!
//! A system call of another architecture (32-bit calls on a 64-bit kernel) kills the process.

use nix::libc;
use process_gate::Instruction;

/// The architecture delta was built for, as seccomp names it.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the sandbox's seccomp program knows x86_64 and aarch64 only");

/// System calls refused to every confined process.
const ALWAYS: [libc::c_long; 32] = [
    // Reaching into other processes.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    // Changing the mounts it sees, or joining other namespaces.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    // The kernel itself.
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    // The user's keyrings, shared with unconfined processes.
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    // Files by handle, past every path rule.
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
];

/// System calls refused too when the network is off.
const NETWORK: [libc::c_long; 2] = [libc::SYS_socket, libc::SYS_io_uring_setup];

/// `ioctl` requests refused: they put bytes into a terminal's input (as if typed), take a terminal
/// as the controlling one, redirect the console or change a line discipline.
const IOCTLS: [u32; 5] = [
    libc::TIOCSTI as u32,
    libc::TIOCLINUX as u32,
    libc::TIOCSCTTY as u32,
    libc::TIOCCONS as u32,
    libc::TIOCSETD as u32,
];

/// The type bits of `socketpair`'s second argument (its flags above them), and the type refused
/// with the network off: a datagram socket can `sendto` any named socket.
const SOCKET_TYPE_MASK: u32 = 0xf;
const SOCK_DGRAM: u32 = libc::SOCK_DGRAM as u32;

/// Where the fields of `struct seccomp_data` are.
const NR_AT: u32 = 0;
const ARCH_AT: u32 = 4;
/// The low 32 bits of the second argument (little-endian), which the kernel's `ioctl` takes as
/// its request: the high bits do not count there, so they are not compared.
const ARG1_LOW_AT: u32 = 16 + 8;

const LOAD_WORD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JUMP_EQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JUMP_GE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const AND: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const RETURN: u16 = 0x06; // BPF_RET | BPF_K
const ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
const KILL: u32 = 0x8000_0000; // SECCOMP_RET_KILL_PROCESS
const REFUSE: u32 = 0x0005_0000 | libc::EACCES as u32; // SECCOMP_RET_ERRNO
/// System call numbers from here up are the x32 ABI's (`__X32_SYSCALL_BIT`).
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

/// One instruction, with a jump to the refusal still to resolve.
#[derive(Clone, Copy)]
enum Step {
    Plain(Instruction),
    /// A comparison that jumps to the refusal when true and goes on when false.
    RefuseIf {
        code: u16,
        k: u32,
    },
}

fn plain(code: u16, k: u32) -> Step {
    Step::Plain(Instruction {
        code,
        jt: 0,
        jf: 0,
        k,
    })
}

/// A check of one system call's second argument: when the number is `nr`, the argument (after
/// `mask`, if any) is compared with each of `refused`, and the call allowed otherwise; another
/// number goes past the block.
fn argument_block(nr: libc::c_long, mask: Option<u32>, refused: &[u32]) -> Vec<Step> {
    let mut block = vec![plain(LOAD_WORD, ARG1_LOW_AT)];
    if let Some(mask) = mask {
        block.push(plain(AND, mask));
    }
    block.extend(refused.iter().map(|k| Step::RefuseIf {
        code: JUMP_EQ,
        k: *k,
    }));
    block.push(plain(RETURN, ALLOW));
    let skip = u8::try_from(block.len()).unwrap_or(u8::MAX);
    let mut steps = vec![Step::Plain(Instruction {
        code: JUMP_EQ,
        jt: 0,
        jf: skip,
        k: nr as u32,
    })];
    steps.extend(block);
    steps
}

/// The program for a process whose network is `network` (on or off).
pub(super) fn program(network: bool) -> Vec<Instruction> {
    let mut steps = vec![
        plain(LOAD_WORD, ARCH_AT),
        Step::Plain(Instruction {
            code: JUMP_EQ,
            jt: 1,
            jf: 0,
            k: ARCH,
        }),
        plain(RETURN, KILL),
        plain(LOAD_WORD, NR_AT),
    ];
    #[cfg(target_arch = "x86_64")]
    steps.push(Step::RefuseIf {
        code: JUMP_GE,
        k: X32_BIT,
    });
    let refused = ALWAYS
        .iter()
        .chain(if network { &[][..] } else { &NETWORK[..] });
    for nr in refused {
        steps.push(Step::RefuseIf {
            code: JUMP_EQ,
            k: *nr as u32,
        });
    }
    steps.extend(argument_block(libc::SYS_ioctl, None, &IOCTLS));
    if !network {
        steps.extend(argument_block(
            libc::SYS_socketpair,
            Some(SOCKET_TYPE_MASK),
            &[SOCK_DGRAM],
        ));
    }
    steps.push(plain(RETURN, ALLOW));
    let refuse_at = steps.len();
    steps.push(plain(RETURN, REFUSE));
    steps
        .iter()
        .enumerate()
        .map(|(at, step)| match *step {
            Step::Plain(instruction) => instruction,
            Step::RefuseIf { code, k } => Instruction {
                code,
                // Within 255: the program is a few dozen instructions.
                jt: u8::try_from(refuse_at - at - 1).unwrap_or(u8::MAX),
                jf: 0,
                k,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` on one call, as the kernel would: the value it returns.
    fn run(program: &[Instruction], arch: u32, nr: u32, arg1: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        data[24..32].copy_from_slice(&arg1.to_le_bytes());
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let i = program[pc];
            pc += 1;
            match i.code {
                LOAD_WORD => {
                    let at = i.k as usize;
                    acc = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                }
                AND => acc &= i.k,
                JUMP_EQ | JUMP_GE => {
                    let hit = if i.code == JUMP_EQ {
                        acc == i.k
                    } else {
                        acc >= i.k
                    };
                    pc += usize::from(if hit { i.jt } else { i.jf });
                }
                RETURN => return i.k,
                other => panic!("unknown instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn refuses_what_it_says_and_lets_the_rest_through() {
        let off = program(false);
        let on = program(true);
        let call = |p: &[Instruction], nr: libc::c_long, arg1: u64| run(p, ARCH, nr as u32, arg1);
        for nr in ALWAYS {
            assert_eq!(call(&on, nr, 0), REFUSE, "{nr}");
            assert_eq!(call(&off, nr, 0), REFUSE, "{nr}");
        }
        assert_eq!(call(&off, libc::SYS_socket, 2), REFUSE);
        assert_eq!(call(&off, libc::SYS_socket, 1), REFUSE);
        assert_eq!(call(&on, libc::SYS_socket, 2), ALLOW);
        assert_eq!(call(&off, libc::SYS_socketpair, 1), ALLOW);
        for nr in [
            libc::SYS_read,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_clone,
        ] {
            assert_eq!(call(&off, nr, 0), ALLOW, "{nr}");
        }
        // ioctl: the two requests, whatever the high bits say; the others pass.
        let sti = libc::TIOCSTI;
        assert_eq!(call(&on, libc::SYS_ioctl, sti), REFUSE);
        assert_eq!(call(&on, libc::SYS_ioctl, sti | 0xffff_0000_0000), REFUSE);
        assert_eq!(call(&on, libc::SYS_ioctl, libc::TIOCLINUX), REFUSE);
        assert_eq!(call(&on, libc::SYS_ioctl, libc::TCGETS), ALLOW);
        assert_eq!(call(&on, libc::SYS_ioctl, libc::TIOCSCTTY), REFUSE);
        // socketpair: streams always; datagrams (whatever the flags) only with the network on.
        let dgram = (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as u64;
        assert_eq!(call(&off, libc::SYS_socketpair, dgram), REFUSE);
        assert_eq!(call(&on, libc::SYS_socketpair, dgram), ALLOW);
        assert_eq!(
            call(&off, libc::SYS_socketpair, libc::SOCK_STREAM as u64),
            ALLOW
        );
        assert_eq!(
            call(&off, libc::SYS_socketpair, libc::SOCK_SEQPACKET as u64),
            ALLOW
        );
        // A call after the argument blocks is still allowed, and one of the list refused.
        assert_eq!(call(&off, libc::SYS_write, 0), ALLOW);
        assert_eq!(call(&off, libc::SYS_unshare, 0), REFUSE);
        // Another architecture is killed; x32 numbers are refused.
        assert_eq!(run(&on, 0x4000_0003, libc::SYS_read as u32, 0), KILL);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(run(&on, ARCH, X32_BIT | libc::SYS_socket as u32, 2), REFUSE);
    }
}

//! What a confined program cannot do: reach the terminal, sockets outside the run, delta itself,
//! metadata outside its writable paths, a root's capabilities, a rule path turned into a link.

use super::*;

#[test]
fn a_confined_tool_cannot_open_the_terminal_or_type_into_it() {
    if testkit::needs::landlock().is_none() || !python() {
        return;
    }
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    let scripts = [
        "exec 3<>/dev/tty && echo TTY-OPENED || echo TTY-REFUSED",
        // TIOCSTI on any descriptor: refused by the filter (EACCES) before the kernel looks.
        "python3 -c 'import fcntl, termios\ntry:\n    fcntl.ioctl(1, termios.TIOCSTI, b\"x\")\nexcept OSError as e:\n    print(\"STI\", e.errno)'",
        "ps -o sid= -p $$ | tr -d ' '; echo PID $$",
        // The user's terminals are not in its /dev/pts (where namespaces can be made).
        "ls /dev/pts | grep -vc ptmx; true",
    ];
    let server = scripted(&scripts);
    // delta under a terminal of its own (`script`), as a person runs it.
    let base = sb.delta(Some(&server));
    let line = format!(
        "{} run --agent agent -w ws -m go",
        env!("CARGO_BIN_EXE_delta")
    );
    let mut script_cmd = std::process::Command::new("script");
    script_cmd
        .args(["-qec", &line, "/dev/null"])
        .current_dir(sb.root.path())
        .stdin(std::process::Stdio::null());
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => script_cmd.env(k, v),
            None => script_cmd.env_remove(k),
        };
    }
    let out = output(script_cmd);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = observations(&sb);
    assert!(seen[0].contains("TTY-REFUSED"), "{}", seen[0]);
    assert!(seen[1].contains("STI 13"), "{}", seen[1]);
    // A session of its own: its session id is its own pid.
    let numbers: Vec<&str> = seen[2]
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    assert!(
        seen[2].contains(&format!("PID {}", numbers.first().unwrap_or(&"?"))),
        "the tool is not a session leader: {}",
        seen[2]
    );
    if testkit::needs::private_mounts().is_some() {
        assert!(seen[3].starts_with("=== STDOUT ===\n0\n"), "{}", seen[3]);
    }
    model_was_told(&server, 1, "STI 13");
}

#[test]
fn network_off_reaches_no_unix_socket_outside_the_run() {
    if testkit::needs::landlock().is_none() || !python() {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    // A server outside the run, on a pathname socket (a session host, a database) and an abstract
    // one.
    let path = sb.path("outside.sock");
    let by_path = UnixListener::bind(&path).unwrap();
    by_path.set_nonblocking(true).unwrap();
    let name = format!("delta-red-team-{}", std::process::id());
    let abstract_addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let by_name = UnixListener::bind_addr(&abstract_addr).unwrap();
    by_name.set_nonblocking(true).unwrap();
    let connect = |target: &str| {
        format!(
            "python3 -c 'import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect({target})\n    print(\"CONNECTED\")\nexcept OSError as e:\n    print(\"REFUSED\", e.errno)'"
        )
    };
    let scripts = [
        connect(&format!("\"{}\"", path.display())),
        connect(&format!("\"\\0{name}\"")),
        "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); print(\"PAIR\", b.recv(1))'"
            .to_string(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let (server, _, seen) = attack(&sb, &scripts);
    assert!(seen[0].contains("REFUSED 13"), "{}", seen[0]);
    assert!(seen[1].contains("REFUSED 13"), "{}", seen[1]);
    assert!(seen[2].contains("PAIR b'x'"), "{}", seen[2]);
    assert!(
        by_path.accept().is_err(),
        "a tool reached the pathname socket"
    );
    assert!(
        by_name.accept().is_err(),
        "a tool reached the abstract socket"
    );
    model_was_told(&server, 0, "REFUSED 13");
}

#[test]
fn a_tool_cannot_trace_delta_or_read_its_key() {
    if !python() {
        return;
    }
    // No filesystem sandbox at all: the filter and delta's own protection still hold.
    let sb = hostile_agent("sandbox: {filesystem: off, network: false}");
    let ready = sb.path("ws/delta.pid");
    let go = sb.path("go");
    let scripts = [
        format!(
            "echo $PPID > delta.pid; while [ ! -e {} ]; do sleep 0.05; done; echo waited",
            go.display()
        ),
        // Root can read another process's environment (delta's key is no longer in it); nobody
        // confined can read its memory.
        "cat /proc/$PPID/environ > stolen.txt 2>&1; \
         head -c 16 /proc/$PPID/mem > /dev/null && echo MEM-READ || echo MEM-REFUSED"
            .to_string(),
        "python3 -c 'import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.ptrace(16, os.getppid(), 0, 0)\nprint(\"PTRACE\", r, ctypes.get_errno())\nfd = libc.syscall(434, os.getppid(), 0)\nprint(\"GETFD\", libc.syscall(438, fd, 3, 0), ctypes.get_errno())'"
            .to_string(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let server = scripted(&scripts);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while !ready.exists() || std::fs::read_to_string(&ready).unwrap().trim().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid: u32 = std::fs::read_to_string(&ready)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, child.id(), "the tool's parent is delta");
    // Whoever can read delta's environment (root can; a user cannot, delta being non-dumpable)
    // does not find the key there.
    let mut environ = Vec::new();
    if let Ok(mut file) = std::fs::File::open(format!("/proc/{pid}/environ")) {
        let _ = file.read_to_end(&mut environ);
    }
    assert!(
        !String::from_utf8_lossy(&environ).contains(KEY),
        "the key is in /proc/{pid}/environ"
    );
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let seen = observations(&sb);
    assert!(seen[1].contains("MEM-REFUSED"), "{}", seen[1]);
    assert!(seen[2].contains("PTRACE -1 13"), "{}", seen[2]);
    assert!(seen[2].contains("GETFD -1 13"), "{}", seen[2]);
    let stolen = std::fs::read_to_string(sb.ws().join("stolen.txt")).unwrap_or_default();
    assert!(!stolen.contains(KEY));
    model_was_told(&server, 2, "PTRACE -1 13");
}

#[test]
fn metadata_outside_the_writable_paths_cannot_change() {
    if testkit::needs::landlock().is_none() || testkit::needs::private_mounts().is_none() {
        return;
    }
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    let outside = sb.file("outside.txt", "mine");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&outside).unwrap();
    let target = outside.display();
    let scripts = [
        format!("chmod 777 {target} && echo CHANGED || echo REFUSED"),
        format!("touch -m -d 2001-01-01 {target} && echo CHANGED || echo REFUSED"),
        format!("chown $(id -u):$(id -g) {target} && echo CHANGED || echo REFUSED"),
        format!(
            "python3 -c 'import os\ntry:\n    os.setxattr(\"{target}\", \"user.x\", b\"1\")\n    print(\"CHANGED\")\nexcept OSError as e:\n    print(\"REFUSED\", e.errno)'"
        ),
        // Inside the workspace all of it still works.
        "touch run.sh && chmod +x run.sh && touch -m -d 2001-01-01 run.sh && echo INSIDE-OK"
            .to_string(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let (server, _, seen) = attack(&sb, &scripts);
    for (script, seen) in scripts.iter().zip(&seen).take(4) {
        assert!(
            seen.contains("REFUSED") && !seen.contains("CHANGED"),
            "{script}: {seen}"
        );
    }
    assert!(seen[4].contains("INSIDE-OK"), "{}", seen[4]);
    let after = std::fs::metadata(&outside).unwrap();
    assert_eq!(after.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        after.modified().unwrap(),
        before.modified().unwrap(),
        "the file's time changed"
    );
    model_was_told(&server, 0, "REFUSED");
}

#[test]
fn a_confined_tool_has_no_capabilities_even_as_root() {
    if !python() {
        return;
    }
    let sb = hostile_agent("sandbox: {filesystem: off, network: false}");
    let scripts = [
        // A device node for the first disk, opened raw.
        "mknod disk b 8 0 && echo MADE || echo REFUSED",
        // Physical memory.
        "head -c 1 /proc/kcore > /dev/null && echo READ || echo REFUSED",
        "grep ^CapEff /proc/self/status",
        // A datagram socket pair can send to any named socket: refused with the network off.
        "python3 -c 'import socket\ntry:\n    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n    print(\"MADE\")\nexcept OSError as e:\n    print(\"REFUSED\", e.errno)'",
    ];
    let (_, _, seen) = attack(&sb, &scripts);
    assert!(seen[0].contains("REFUSED"), "{}", seen[0]);
    assert!(!sb.ws().join("disk").exists());
    assert!(seen[1].contains("REFUSED"), "{}", seen[1]);
    assert!(seen[2].contains("CapEff:\t0000000000000000"), "{}", seen[2]);
    assert!(seen[3].contains("REFUSED 13"), "{}", seen[3]);
}

#[test]
fn a_rule_path_in_the_workspace_never_follows_a_link_out_of_it() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    // An earlier run's tool made `data` a link to a folder outside; this agent reads `data` only.
    let sb = hostile_agent("sandbox: {filesystem: read-only, network: false, readable: [data]}");
    let secret = sb.file("secret/key.txt", "the secret");
    std::fs::create_dir_all(sb.ws()).unwrap();
    std::os::unix::fs::symlink(secret.parent().unwrap(), sb.ws().join("data")).unwrap();
    let server = scripted(&["cat data/key.txt"]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1, "{out:?}");
    let failed = sb.events("RUN_FAILED");
    let text = format!("{out:?} {failed:?}");
    assert!(text.contains("leads out of the workspace"), "{text}");
    assert!(sb.events("ACTION_RESULT").is_empty(), "a tool ran");
}

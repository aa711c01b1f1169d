//! `llm::connect`: one provider table per tool, one function for every answer source.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use llm::connect::{Environment, Keyless, Options, ProviderVars, QueueOptions};
use llm::queue::QueueError;
use llm::{
    Answers, ChatRequest, ConnectError, ContentBlock, LlmError, Message, Provider, Source,
    SourceKind,
};
use testkit::{Reply, ScriptedServer};

/// A tool that prefers its own variables and falls back to the provider's.
fn table(keyless: Keyless) -> ProviderVars {
    ProviderVars {
        key: vec!["TOOL_API_KEY", "OPENAI_API_KEY"],
        base_url: vec!["TOOL_BASE_URL", "OPENAI_BASE_URL"],
        model: vec!["TOOL_MODEL", "OPENAI_MODEL_ID"],
        default_model: Some("small-model"),
        keyless,
        key_place: "in the environment",
        missing_key_hint: Cow::Borrowed("export TOOL_API_KEY=..."),
    }
}

const SECRETS: [&str; 3] = ["TOOL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn connect(
    provider: Provider,
    keyless: Keyless,
    env: &BTreeMap<String, String>,
    source: &Source,
) -> Result<llm::Connection, ConnectError> {
    let lookup = |var: &str| env.get(var).cloned();
    let environment = Environment::new(&lookup, &SECRETS);
    llm::connect(
        provider,
        &table(keyless),
        &environment,
        source,
        Options::default(),
    )
}

fn request(text: &str) -> ChatRequest {
    ChatRequest::new("m", vec![Message::user(text)])
}

#[test]
fn fallback_variables_are_used_with_a_notice_and_every_secret_is_scrubbed() {
    let server = ScriptedServer::start([Reply::text("hello")]);
    let env = vars(&[
        ("OPENAI_API_KEY", "sk-fallback-1"),
        ("ANTHROPIC_API_KEY", "sk-other-2"),
        ("OPENAI_BASE_URL", &server.openai_base()),
    ]);
    let conn = connect(Provider::OpenAi, Keyless::Never, &env, &Source::api()).unwrap();
    assert_eq!(
        conn.notices,
        [
            "using OPENAI_API_KEY (consider renaming it to TOOL_API_KEY)",
            "using OPENAI_BASE_URL (consider renaming it to TOOL_BASE_URL)",
        ]
    );
    assert!(
        conn.endpoint.contains(&server.openai_base()),
        "{}",
        conn.endpoint
    );
    assert!(conn.playback.is_none());
    for secret in ["sk-fallback-1", "sk-other-2"] {
        assert!(conn.redactor.leaks(secret), "{secret}");
    }
    let answer = conn.client.complete(&request("hi")).unwrap();
    assert_eq!(answer.text(), "hello");
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), Some("Bearer sk-fallback-1"));
}

#[test]
fn a_server_without_a_key_is_used_only_as_the_table_allows() {
    let missing = |r: Result<llm::Connection, ConnectError>| match r {
        Err(e @ ConnectError::MissingKey { var, .. }) => {
            assert_eq!(var, "TOOL_API_KEY");
            assert_eq!(
                e.to_string(),
                "API key not found: set TOOL_API_KEY (in the environment)"
            );
            assert_eq!(e.hint().as_deref(), Some("export TOOL_API_KEY=..."));
        }
        Err(e) => panic!("{e}"),
        Ok(c) => panic!("connected to {}", c.endpoint),
    };
    let local = vars(&[("TOOL_BASE_URL", "http://127.0.0.1:9/v1")]);
    let remote = vars(&[("TOOL_BASE_URL", "https://models.example/v1")]);
    let nothing = vars(&[]);
    let api = Source::api();

    missing(connect(Provider::OpenAi, Keyless::Never, &local, &api));
    let c = connect(Provider::OpenAi, Keyless::Loopback, &local, &api).unwrap();
    assert_eq!(
        c.notices,
        ["no API key set; talking to the local server at http://127.0.0.1:9/v1 without one"]
    );
    missing(connect(Provider::OpenAi, Keyless::Loopback, &remote, &api));
    let c = connect(Provider::OpenAi, Keyless::GivenUrl, &remote, &api).unwrap();
    assert!(c.notices.is_empty(), "{:?}", c.notices);
    missing(connect(Provider::OpenAi, Keyless::GivenUrl, &nothing, &api));
    // Anthropic always needs a key, whatever the table says.
    let c = connect(Provider::Anthropic, Keyless::GivenUrl, &local, &api);
    assert!(matches!(c, Err(ConnectError::MissingKey { .. })));
}

#[test]
fn the_model_is_the_first_variable_set_else_the_default() {
    let check = |pairs: &[(&str, &str)]| {
        let env = vars(pairs);
        let lookup = |var: &str| env.get(var).cloned();
        table(Keyless::Never).model(&Environment::new(&lookup, &[]))
    };
    assert_eq!(check(&[]).as_deref(), Some("small-model"));
    assert_eq!(
        check(&[("OPENAI_MODEL_ID", "b"), ("TOOL_MODEL", "a")]).as_deref(),
        Some("a")
    );
    let standard = ProviderVars::standard(Provider::Anthropic);
    assert_eq!(standard.key, ["ANTHROPIC_API_KEY"]);
    assert_eq!(standard.default_model, None);
}

#[test]
fn a_recorded_exchange_plays_back_without_a_key_or_a_server() {
    let server = ScriptedServer::start([Reply::text("recorded answer")]);
    let dir = tempfile::tempdir().unwrap();
    let recordings = dir.path().join("rec");
    let env = vars(&[
        ("TOOL_API_KEY", "sk-rec-1"),
        ("TOOL_BASE_URL", &server.openai_base()),
    ]);
    let record = Source {
        answers: Answers::Api,
        record: Some(recordings.clone()),
    };
    let conn = connect(Provider::OpenAi, Keyless::Never, &env, &record).unwrap();
    assert!(conn.endpoint.contains("recording to"), "{}", conn.endpoint);
    conn.client.complete(&request("hi")).unwrap();
    assert!(recordings.join("turn-1.json").is_file());

    let replay = Source {
        answers: Answers::Playback(recordings.clone()),
        record: None,
    };
    let conn = connect(Provider::OpenAi, Keyless::Never, &vars(&[]), &replay).unwrap();
    assert!(conn.endpoint.starts_with("playback"), "{}", conn.endpoint);
    let answer = conn.client.complete(&request("hi")).unwrap();
    assert_eq!(answer.text(), "recorded answer");
    assert_eq!(conn.playback.unwrap().state().used, ["turn-1.json"]);
    assert_eq!(server.request_count(), 1);

    let gone = Source {
        answers: Answers::Playback(dir.path().join("nope")),
        record: None,
    };
    let err = connect(Provider::OpenAi, Keyless::Never, &vars(&[]), &gone)
        .err()
        .unwrap();
    assert!(matches!(err, ConnectError::Playback(_)), "{err:?}");
    assert!(err.to_string().contains("recordings directory not found"));
}

#[test]
fn source_kinds_keep_their_saved_names() {
    for (kind, name) in [
        (SourceKind::Api, "api"),
        (SourceKind::Manual, "manual"),
        (SourceKind::Playback, "playback"),
        (SourceKind::Queue, "queue"),
    ] {
        assert_eq!(kind.name(), name);
        assert_eq!(SourceKind::from_name(name), Some(kind));
        assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
    }
    assert_eq!(SourceKind::from_name("carrier-pigeon"), None);
}

fn label(_: &ChatRequest) -> String {
    "review".to_string()
}

/// Waits for the one request file of the queue in `dir`.
fn wait_for_request(dir: &Path) -> (String, serde_json::Value) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let found = std::fs::read_dir(dir.join("requests"))
            .unwrap()
            .filter_map(Result::ok)
            .find_map(|e| {
                // Only a request in place: not the temporary file it is written to first.
                let name = e.file_name().to_string_lossy().into_owned();
                let id = name
                    .strip_suffix(".json")
                    .filter(|_| !name.starts_with('.'))?;
                let text = std::fs::read_to_string(e.path()).ok()?;
                let value: serde_json::Value = serde_json::from_str(&text).ok()?;
                Some((id.to_string(), value))
            });
        if let Some(found) = found {
            return found;
        }
        assert!(
            Instant::now() < until,
            "no request file in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn queue_source(dir: &Path, timeout: Duration) -> Source {
    Source {
        answers: Answers::Queue(QueueOptions {
            dir: dir.to_path_buf(),
            timeout,
            prefix: "exec-1".into(),
            label,
        }),
        record: None,
    }
}

#[test]
fn the_file_queue_asks_through_files_and_scrubs_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let queue = dir.path().join("queue");
    let env = vars(&[("TOOL_API_KEY", "sk-queue-secret")]);
    let source = queue_source(&queue, Duration::from_secs(20));
    let conn = connect(Provider::OpenAi, Keyless::Never, &env, &source).unwrap();
    assert!(conn.endpoint.starts_with("file queue"), "{}", conn.endpoint);
    let responder = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            let (id, request) = wait_for_request(&queue);
            let answer = r#"{"response": "ok", "tools": [{"name": "next", "input": {"n": 1}}]}"#;
            std::fs::write(queue.join("responses").join(format!("{id}.json")), answer).unwrap();
            (id, request)
        })
    };
    let answer = conn
        .client
        .complete(&request("the key is sk-queue-secret"))
        .unwrap();
    let (id, sent) = responder.join().unwrap();
    assert!(id.starts_with("exec-1-"), "{id}");
    assert_eq!(sent["node"], "review");
    assert_eq!(sent["type"], "llm_request");
    let text = sent.to_string();
    assert!(!text.contains("sk-queue-secret"), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
    assert_eq!(answer.text(), "ok");
    assert!(matches!(
        &answer.content[1],
        ContentBlock::ToolCall { name, .. } if name == "next"
    ));
    // Answered: neither file stays.
    assert_eq!(
        std::fs::read_dir(queue.join("requests")).unwrap().count(),
        0
    );
    assert_eq!(
        std::fs::read_dir(queue.join("responses")).unwrap().count(),
        0
    );
}

#[test]
fn the_file_queue_reports_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let queue = dir.path().join("queue");
    let env = vars(&[]);
    let slow = queue_source(&queue, Duration::from_millis(300));
    let conn = connect(Provider::OpenAi, Keyless::Never, &env, &slow).unwrap();
    let started = Instant::now();
    match conn.client.complete(&request("anyone?")) {
        Err(LlmError::Queue(e)) => {
            assert!(matches!(*e, QueueError::Timeout { .. }), "{e:?}");
            assert!(
                e.to_string()
                    .starts_with("Timeout waiting for response to request exec-1-")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));

    let source = queue_source(&queue, Duration::from_secs(20));
    let conn = connect(Provider::OpenAi, Keyless::Never, &env, &source).unwrap();
    let responder = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            let (id, _) = wait_for_request(&queue);
            std::fs::write(
                queue.join("responses").join(format!("{id}.json")),
                "{\"x\": 1}",
            )
            .unwrap();
        })
    };
    let result = conn.client.complete(&request("answer badly"));
    responder.join().unwrap();
    match result {
        Err(LlmError::Queue(e)) => {
            assert!(matches!(*e, QueueError::Unreadable { .. }), "{e:?}");
            assert_eq!(LlmError::from(*e).kind(), "source");
        }
        other => panic!("{other:?}"),
    }

    // A queue folder that cannot be created is refused before anything is asked.
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let err = connect(
        Provider::OpenAi,
        Keyless::Never,
        &env,
        &queue_source(&file, Duration::from_secs(1)),
    )
    .err()
    .unwrap();
    assert!(matches!(err, ConnectError::Queue(_)), "{err:?}");
}

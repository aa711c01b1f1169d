//! One status vocabulary: what the text summary says, the exit code and the result file agree.

use serde_json::Value;
use testkit::{Reply, ScriptedServer};

use super::support::Dir;

const ORDER: &str = "machine \"Order flow\"
Context order { total<number>: 0; }
Task charge \"Charge the card\" { prompt: \"Charge {{ order.total }}\"; }
State shipped;
start -> charge -when: 'order.total > 0'-> shipped;
charge -writes-> order;
";

fn result(d: &Dir) -> Value {
    let text = std::fs::read_to_string(d.path().join("generated/order-result.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn an_llm_failure_reads_the_same_in_the_summary_the_exit_code_and_the_result_file() {
    for format in ["text", "json"] {
        let server = ScriptedServer::start([Reply::error(400, "no such model")]);
        let mut d = Dir::with_file("order.dy", ORDER);
        d.env("OPENAI_BASE_URL", &server.openai_base());
        let out = d.run(&["e", "order.dy", "--provider", "openai", "--format", format]);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains("no such model"), "{out:?}");
        let result = result(&d);
        assert_eq!(result["status"], "error", "{result}");
        assert_eq!(result["errorCount"], 1, "{result}");
        let failed = &result["paths"][0];
        assert_eq!(failed["status"], "failed", "{result}");
        assert!(
            failed["error"].as_str().unwrap().contains("no such model"),
            "{result}"
        );
        if format == "text" {
            assert!(out.stdout.contains("Status: error\n"), "{out:?}");
            assert!(out.stdout.contains("Errors: 1\n"), "{out:?}");
        } else {
            assert_eq!(out.json(), result);
        }
    }
}

#[test]
fn the_turn_by_turn_summary_exit_code_and_result_file_agree_when_a_path_fails() {
    // The model answers without tools while the only transition is closed: the path fails.
    let server = ScriptedServer::start([Reply::text("Nothing to charge.")]);
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("OPENAI_BASE_URL", &server.openai_base());
    let call = || {
        d.run(&[
            "e",
            "-i",
            "order.dy",
            "--id",
            "x",
            "--provider",
            "openai",
            "-d",
            "generated",
        ])
    };
    assert_eq!(call().code, 0);
    let out = call();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("Status: error\n"), "{out:?}");
    let result = result(&d);
    assert_eq!(result["status"], "error");
    assert_eq!(result["errorCount"], 1);
    let status = d.status_json("x");
    assert_eq!(status["status"], "error");
    let again = call();
    assert_eq!(again.code, 1, "{again:?}");
    assert!(again.stdout.contains("Status: error\n"), "{again:?}");
}

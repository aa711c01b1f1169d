//! `mcp_servers:` in agent.yaml: the MCP servers whose tools a run offers the model.
//!
//! ```yaml
//! mcp_servers:
//!   - name: files                      # the model sees files__<tool>
//!     command: npx                     # stdio: a program, its args, env and working folder
//!     args: ["-y", "@modelcontextprotocol/server-filesystem", "."]
//!     env: {TOKEN: "${FILES_TOKEN}"}
//!   - name: tracker                    # streamable HTTP: a URL and headers
//!     url: http://127.0.0.1:8080/mcp
//!     headers: {Authorization: "Bearer ${TRACKER_TOKEN}"}
//!     timeout_seconds: 30
//! ```
//!
//! `${VAR}` in `command`, `args`, `env`, `cwd`, `url` and `headers` is taken from the run's
//! environment (the process's and the `.env` files') when the servers start. A value of `env` or
//! `headers` that names a variable is a secret: it is scrubbed from everything the run writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::diag::Diagnostic;

/// One entry of `mcp_servers:` as written.
#[derive(Debug, Deserialize)]
pub struct RawMcpServer {
    pub name: String,
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub timeout_seconds: Option<f64>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    /// Streamable HTTP at one URL.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// One MCP server of an agent, as configured (`${VAR}` not yet expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// The prefix of its tools' names: `<name>__<tool>`.
    pub name: String,
    pub transport: McpTransport,
    /// How long one request (starting it, a call) may take.
    pub timeout: Duration,
}

/// A `${VAR}` that the environment does not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server {server}: {field} uses ${{{var}}}, which is not set")]
pub struct UnsetVariable {
    pub server: String,
    pub field: String,
    pub var: String,
}

impl McpServerSpec {
    /// The spec with every `${VAR}` replaced from `lookup`, and the values that are secrets (those of
    /// the variables named in `env` and `headers`).
    pub fn resolve(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(McpServerSpec, Vec<String>), UnsetVariable> {
        let secrets = std::cell::RefCell::new(Vec::new());
        let expand = |field: &str, text: &str| {
            expand(text, lookup).map_err(|Unset(var)| UnsetVariable {
                server: self.name.clone(),
                field: field.to_string(),
                var,
            })
        };
        let pairs = |field: &str, pairs: &[(String, String)]| {
            pairs
                .iter()
                .map(|(k, v)| {
                    let value = expand(&format!("{field}.{k}"), v)?;
                    // The variables' own values are the secrets, wherever they appear.
                    let noted = |name: &str| {
                        let found = lookup(name);
                        secrets.borrow_mut().extend(found.clone());
                        found
                    };
                    let _ = super::mcp::expand(v, &noted);
                    Ok((k.clone(), value))
                })
                .collect::<Result<Vec<_>, UnsetVariable>>()
        };
        let transport = match &self.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => McpTransport::Stdio {
                env: pairs("env", env)?,
                command: expand("command", command)?,
                args: args
                    .iter()
                    .map(|a| expand("args", a))
                    .collect::<Result<_, _>>()?,
                cwd: cwd.as_deref().map(|c| expand("cwd", c)).transpose()?,
            },
            McpTransport::Http { url, headers } => McpTransport::Http {
                headers: pairs("headers", headers)?,
                url: expand("url", url)?,
            },
        };
        let spec = McpServerSpec {
            transport,
            ..self.clone()
        };
        Ok((spec, secrets.into_inner()))
    }

    /// The folder a stdio server starts in: its `cwd` (relative to the agent folder), or `default`.
    pub fn start_dir(&self, agent_dir: &Path, default: &Path) -> PathBuf {
        match &self.transport {
            McpTransport::Stdio { cwd: Some(cwd), .. } => agent_dir.join(cwd),
            _ => default.to_path_buf(),
        }
    }
}

/// The variables whose values the servers of `specs` take as secrets: those named in their `env`
/// and `headers`.
pub fn secret_vars(specs: &[McpServerSpec]) -> Vec<String> {
    let names = std::cell::RefCell::new(Vec::new());
    let note = |name: &str| {
        names.borrow_mut().push(name.to_string());
        Some(String::new())
    };
    for spec in specs {
        let pairs = match &spec.transport {
            McpTransport::Stdio { env, .. } => env,
            McpTransport::Http { headers, .. } => headers,
        };
        for (_, value) in pairs {
            let _ = expand(value, &note);
        }
    }
    names.into_inner()
}

/// How `${NAME}` is looked up for the servers of the agent in `agent_dir`: the run's environment,
/// and `AGENT_HOME` (the agent folder, as tools have it) when the environment does not set it.
pub fn lookup<'a>(
    env: &'a crate::env::Env,
    agent_dir: &'a Path,
) -> impl Fn(&str) -> Option<String> + 'a {
    move |name: &str| match env.get(name) {
        Some(value) => Some(value.to_string()),
        None if name == "AGENT_HOME" => Some(agent_dir.display().to_string()),
        None => None,
    }
}

/// A variable `${NAME}` names that is not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("${{{0}}} is not set")]
pub struct Unset(pub String);

/// `text` with each `${NAME}` replaced by `lookup(NAME)`; [`Unset`] for one that is not set. `$$`
/// is left as it is, as is a `$` not followed by `{`.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Unset> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            return Ok(out);
        };
        let name = &after[..end];
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            out.push_str(&lookup(name).ok_or_else(|| Unset(name.to_string()))?);
        } else {
            out.push_str(&rest[at..at + 3 + end]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Checks the `mcp_servers:` of `config_file` (`source` its text); each problem becomes a
/// diagnostic.
pub(super) fn load(
    raw: &[Spanned<RawMcpServer>],
    config_file: &Path,
    source: &str,
    default_timeout: Duration,
    diags: &mut Vec<Diagnostic>,
) -> Vec<McpServerSpec> {
    let mut servers: Vec<McpServerSpec> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let at = |message: String, field: &str| {
            Diagnostic::new(config_file, message)
                .at(
                    source,
                    entry.referenced.line() as usize,
                    entry.referenced.column() as usize,
                )
                .field(format!("mcp_servers[{i}]{field}"))
        };
        let server = &entry.value;
        let name_ok = !server.name.is_empty()
            && server.name.len() <= 32
            && !server.name.contains("__")
            && server
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            diags.push(
                at(
                    format!("invalid server name {:?}", server.name),
                    ".name",
                )
                .hint("use 1 to 32 letters, digits, '_' or '-' (no '__': it separates the server from the tool)"),
            );
            continue;
        }
        if servers.iter().any(|s| s.name == server.name) {
            diags.push(at(
                format!("server {:?} is named twice", server.name),
                ".name",
            ));
            continue;
        }
        let timeout = match server.timeout_seconds {
            None => default_timeout,
            Some(s) => match super::seconds(s) {
                Some(t) => t,
                None => {
                    diags.push(at(
                        format!("must be {}", super::SECONDS_EXPECTED),
                        ".timeout_seconds",
                    ));
                    continue;
                }
            },
        };
        let pairs = |map: &BTreeMap<String, String>| {
            map.iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>()
        };
        let transport = match (&server.command, &server.url) {
            (Some(command), None) if !command.trim().is_empty() => McpTransport::Stdio {
                command: command.clone(),
                args: server.args.clone(),
                env: pairs(&server.env),
                cwd: server.cwd.clone(),
            },
            (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                McpTransport::Http {
                    url: url.clone(),
                    headers: pairs(&server.headers),
                }
            }
            (None, Some(url)) => {
                diags.push(at(
                    format!("{url:?} is not an http:// or https:// URL"),
                    ".url",
                ));
                continue;
            }
            _ => {
                diags.push(
                    at("give either `command` (a stdio server) or `url` (streamable HTTP)".into(), "")
                        .hint("command: with args/env/cwd starts a program; url: with headers reaches a running server"),
                );
                continue;
            }
        };
        servers.push(McpServerSpec {
            name: server.name.clone(),
            transport,
            timeout,
        });
    }
    servers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cr3t-value".into()),
            "HOST" => Some("127.0.0.1".into()),
            _ => None,
        }
    }

    #[test]
    fn variables_are_expanded_and_unset_ones_named() {
        assert_eq!(expand("a ${TOKEN} b", &lookup).unwrap(), "a s3cr3t-value b");
        assert_eq!(
            expand("$HOME ${} ${x-y} $${TOKEN", &lookup).unwrap(),
            "$HOME ${} ${x-y} $${TOKEN"
        );
        assert_eq!(expand("${NOPE}", &lookup), Err(Unset("NOPE".to_string())));
    }

    #[test]
    fn values_that_name_a_variable_are_secrets() {
        let spec = McpServerSpec {
            name: "t".into(),
            transport: McpTransport::Http {
                url: "http://${HOST}:1/mcp".into(),
                headers: vec![
                    ("Authorization".into(), "Bearer ${TOKEN}".into()),
                    ("X-Plain".into(), "visible".into()),
                ],
            },
            timeout: Duration::from_secs(1),
        };
        let (resolved, secrets) = spec.resolve(&lookup).unwrap();
        assert_eq!(secrets, vec!["s3cr3t-value".to_string()]);
        assert_eq!(
            secret_vars(std::slice::from_ref(&spec)),
            vec!["TOKEN".to_string()]
        );
        let McpTransport::Http { url, .. } = resolved.transport else {
            panic!("http")
        };
        assert_eq!(url, "http://127.0.0.1:1/mcp");
        let unset = McpServerSpec {
            transport: McpTransport::Http {
                url: "http://${MISSING}/".into(),
                headers: vec![],
            },
            ..spec
        };
        assert_eq!(
            unset.resolve(&lookup).unwrap_err().to_string(),
            "MCP server t: url uses ${MISSING}, which is not set"
        );
    }
}

//! The engine's side of hooks: running one at a step of the loop, journaling its audit, and taking
//! what the request and response hooks give back.

use serde_json::Value;

use super::{Engine, EngineError, Observer, Progress};
use crate::agent::HookName;
use crate::events::{Event, HookStatus, Level};
use crate::hooks::HookOutcome;
use llm::{ChatRequest, ChatResponse};
use std::sync::Arc;

impl Engine<'_> {
    pub(super) fn run_hook(
        &mut self,
        name: HookName,
        payload: &Value,
    ) -> Result<Option<HookOutcome>, EngineError> {
        // Nothing new is started once an interrupt was asked for.
        if !self.hooks.has(name) || self.interrupted() {
            return Ok(None);
        }
        self.sync()?;
        let step = self.metadata.iterations_completed + 1;
        let interrupt = Arc::clone(&self.setup.interrupt);
        let Some(outcome) = self.hooks.run(name, step, payload, &interrupt) else {
            return Ok(None);
        };
        self.append(Event::HookExecutionAudit {
            hook_name: name.as_str().into(),
            status: outcome.status,
            io_path_ref: outcome.io_path_ref.clone(),
        })?;
        if !outcome.problems.is_empty() {
            self.log(&format!(
                "{} hook: {}",
                name.as_str(),
                outcome.problems.join("; ")
            ));
        }
        self.observer.progress(Progress::Hook {
            name,
            status: outcome.status,
            problems: outcome.problems.clone(),
        });
        Ok(Some(outcome))
    }

    /// The `pre_llm_req` hook: it sees the request in the chat-completions format (whatever the
    /// provider) and may replace it.
    pub(super) fn pre_llm_request(
        &mut self,
        request: ChatRequest,
    ) -> Result<ChatRequest, EngineError> {
        let proposed = llm::openai::request_body(&request, false, false);
        let Some(outcome) = self.run_hook(HookName::PreLlmReq, &proposed)? else {
            return Ok(request);
        };
        match (outcome.status, outcome.final_payload) {
            (HookStatus::Success, Some(payload)) => match llm::openai::parse_request(&payload) {
                Ok(modified) => {
                    self.log("pre_llm_req hook succeeded, using modified payload");
                    return Ok(modified);
                }
                Err(e) => self.system(
                    Level::Warn,
                    &format!(
                        "pre_llm_req hook output ignored: not a chat-completions request ({e})"
                    ),
                )?,
            },
            (HookStatus::Failed, _) => {
                let problems = outcome.problems.join("; ");
                self.system(Level::Warn, &format!("pre_llm_req hook failed: {problems}"))?;
            }
            _ => {}
        }
        Ok(request)
    }

    /// The `post_llm_resp` hook: it sees the answer; a failure is noted in the journal.
    pub(super) fn post_llm_response(
        &mut self,
        invocation_id: &str,
        response: &ChatResponse,
    ) -> Result<(), EngineError> {
        let payload = self.response_object(invocation_id, response);
        if let Some(outcome) = self.run_hook(HookName::PostLlmResp, &payload)?
            && outcome.status == HookStatus::Failed
        {
            let problems = outcome.problems.join("; ");
            self.system(
                Level::Warn,
                &format!("post_llm_resp hook failed: {problems}"),
            )?;
        }
        Ok(())
    }
}

//! Errors and warnings about a program, and their rendering (file:line:column, the source line and
//! a caret under the offending text).

use annotate_snippets::{AnnotationKind, Level, Renderer, Snippet};

use dygram_syntax::source::{SourceFile, Span};

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The program is invalid.
    Error,
    /// The program is valid but probably not what was meant.
    Warning,
}

/// What kind of problem it is (decides the outcome class of a program).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The text could not be read (lexing or parsing).
    Syntax,
    /// The text was read but the program is invalid (names, types, multiplicities, imports).
    Validation,
    /// A warning about the shape of the graph (orphaned or unreachable nodes, no entry point).
    /// Left out for imported files: a library's nodes are meant to be wired up by its importer.
    Graph,
}

/// A machine-readable fix: the text at `span` becomes `replacement` (e.g. a misspelled name the
/// closest known one, see [`crate::suggest`]). Editors offer it as a quick fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    /// What to replace.
    pub span: Span,
    /// The text to put there.
    pub replacement: String,
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Syntax or validation.
    pub stage: Stage,
    /// What is wrong.
    pub message: String,
    /// Where (absent for problems of the whole file).
    pub span: Option<Span>,
    /// Another place the message refers to (e.g. the first declaration of a duplicate).
    pub related: Option<(Span, String)>,
    /// How to fix it, when there is something useful to say.
    pub hint: Option<String>,
    /// A fix that can be applied as it is, when there is one (the hint then says it in words).
    pub suggestion: Option<Suggestion>,
}

impl Diagnostic {
    /// An error.
    pub fn error(stage: Stage, message: impl Into<String>, span: Option<Span>) -> Self {
        Self {
            severity: Severity::Error,
            stage,
            message: message.into(),
            span,
            related: None,
            hint: None,
            suggestion: None,
        }
    }

    /// A warning (validation stage).
    pub fn warning(message: impl Into<String>, span: Option<Span>) -> Self {
        Self {
            severity: Severity::Warning,
            stage: Stage::Validation,
            message: message.into(),
            span,
            related: None,
            hint: None,
            suggestion: None,
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a fix: the text at `span` becomes `replacement`.
    pub fn with_suggestion(mut self, span: Span, replacement: impl Into<String>) -> Self {
        self.suggestion = Some(Suggestion {
            span,
            replacement: replacement.into(),
        });
        self
    }

    /// Adds a related place.
    pub fn with_related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related = Some((span, label.into()));
        self
    }

    /// Whether it is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `path:line:column: message` on one line (1-based line and column).
    pub fn one_line(&self, file: &SourceFile) -> String {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match self.span {
            Some(span) => {
                let p = file.position(span.start as usize);
                format!(
                    "{}:{}:{}: {kind}: {}",
                    file.name(),
                    p.line + 1,
                    p.character + 1,
                    self.message
                )
            }
            None => format!("{}: {kind}: {}", file.name(), self.message),
        }
    }

    /// The diagnostic in the style of rustc: header, location, source lines with a caret, hint.
    pub fn render(&self, file: &SourceFile, color: bool) -> String {
        let level = match self.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        let Some(span) = self.span else {
            return render_titles(&renderer, level, &self.message, self.hint.as_deref(), file);
        };
        // Only the lines the spans touch are handed to the renderer (files can be large).
        let mut first_line = file.line_of(span.start as usize);
        let mut last_line = file.line_of((span.end as usize).max(span.start as usize));
        if let Some((related, _)) = &self.related {
            first_line = first_line.min(file.line_of(related.start as usize));
            last_line = last_line.max(file.line_of(related.end as usize));
        }
        // Long spans (a whole block) are shown by their first line.
        if last_line > first_line + 3 {
            last_line = first_line + 3;
        }
        let text = file.text();
        let base = file.line_start(first_line);
        let end = file.line_start(last_line + 1).min(text.len());
        let excerpt = text.get(base..end).unwrap_or("");
        let clamp = |s: Span| {
            let a = (s.start as usize).clamp(base, end) - base;
            let b = (s.end as usize).clamp(base, end) - base;
            a..b.max(a)
        };
        let mut snippet = Snippet::source(excerpt)
            .line_start(first_line + 1)
            .path(file.name())
            .annotation(AnnotationKind::Primary.span(clamp(span)));
        if let Some((related, label)) = &self.related {
            snippet =
                snippet.annotation(AnnotationKind::Context.span(clamp(*related)).label(label));
        }
        let mut report = vec![level.primary_title(&self.message).element(snippet)];
        if let Some(hint) = &self.hint {
            report.push(annotate_snippets::Group::with_title(
                Level::HELP.secondary_title(hint),
            ));
        }
        renderer.render(&report).to_string()
    }
}

fn render_titles(
    renderer: &Renderer,
    level: Level<'_>,
    message: &str,
    hint: Option<&str>,
    file: &SourceFile,
) -> String {
    let mut report = vec![
        level
            .primary_title(message)
            .element(annotate_snippets::Origin::path(file.name())),
    ];
    if let Some(hint) = hint {
        report.push(annotate_snippets::Group::with_title(
            Level::HELP.secondary_title(hint),
        ));
    }
    renderer.render(&report).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_location_source_and_caret() {
        let file = SourceFile::new("m.dy", "machine \"x\"\nx: -3;\n");
        let d = Diagnostic::error(
            Stage::Syntax,
            "expected a value, found `-`",
            Some(Span::new(15, 16)),
        )
        .with_hint("write the value in quotes");
        let text = d.render(&file, false);
        assert!(
            text.contains("error: expected a value, found `-`"),
            "{text}"
        );
        assert!(text.contains("m.dy:2:4"), "{text}");
        assert!(text.contains("x: -3;"), "{text}");
        assert!(text.contains('^'), "{text}");
        assert!(text.contains("help: write the value in quotes"), "{text}");
        assert_eq!(
            d.one_line(&file),
            "m.dy:2:4: error: expected a value, found `-`"
        );
    }
}

//! The agent templates of `delta init`, embedded in the binary.

/// One file of a template.
pub struct TemplateFile {
    /// File name.
    pub name: &'static str,
    /// Contents.
    pub content: &'static str,
}

/// A template.
pub struct Template {
    /// Its name (`-t`).
    pub name: &'static str,
    /// One line about it.
    pub summary: &'static str,
    /// Its files.
    pub files: [TemplateFile; 4],
}

macro_rules! template {
    ($name:literal, $summary:literal) => {
        Template {
            name: $name,
            summary: $summary,
            files: [
                TemplateFile {
                    name: "agent.yaml",
                    content: include_str!(concat!("../../templates/", $name, "/agent.yaml")),
                },
                TemplateFile {
                    name: "system_prompt.md",
                    content: include_str!(concat!("../../templates/", $name, "/system_prompt.md")),
                },
                TemplateFile {
                    name: "context.yaml",
                    content: include_str!(concat!("../../templates/", $name, "/context.yaml")),
                },
                TemplateFile {
                    name: "README.md",
                    content: include_str!(concat!("../../templates/", $name, "/README.md")),
                },
            ],
        }
    };
}

/// Every template, the default first.
pub const TEMPLATES: [Template; 4] = [
    template!("minimal", "echo and write files: the smallest useful agent"),
    template!(
        "hello-world",
        "print messages, create and list files, tell the date"
    ),
    template!(
        "file-ops",
        "organize files: list, make folders, move, copy, find"
    ),
    template!("api-tester", "test HTTP APIs with curl and report"),
];

/// The template called `name`.
pub fn find(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

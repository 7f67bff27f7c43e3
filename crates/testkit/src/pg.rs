//! PostgreSQL for the team-ledger tests: a fresh database per test (created on the
//! server at `DLQ_TRIAGE_TEST_PG`, default `postgres://postgres@127.0.0.1:5432/test`,
//! dropped when the test ends), required in CI like the brokers.

/// The server the tests create their databases on.
pub fn admin_url() -> String {
    std::env::var("DLQ_TRIAGE_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A database of its own for one test; dropped (with its connections) on drop.
pub struct TempDb {
    pub url: String,
    name: String,
}

impl TempDb {
    /// `None` (skipped, with a message) when there is no server, unless required.
    pub fn create() -> Option<TempDb> {
        let admin = admin_url();
        let client = postgres::Client::connect(&admin, postgres::NoTls);
        let up = crate::service::present(
            client.is_ok(),
            "PostgreSQL on 127.0.0.1:5432",
            "start it (`pg_ctlcluster 15 main start`) or set DLQ_TRIAGE_TEST_PG",
        );
        let mut client = client.ok().filter(|_| up)?;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!(
            "dlq_test_{}_{}_{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a test database");
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
        Some(TempDb {
            url: format!("{base}/{name}"),
            name,
        })
    }

    /// A login role of its own for one engineer, with exactly the grants the README
    /// gives the team (read from the README, so the documented setup is the tested one);
    /// the URL that connects as it. The schema must exist (open a ledger on `url` first).
    pub fn engineer(&self, name: &str) -> String {
        let role = format!("{name}_{}", std::process::id());
        let mut c = self.client();
        c.batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;"
        ))
        .expect("role");
        c.batch_execute(&readme_grants(&role))
            .expect("the README's grants");
        self.url.replacen("postgres@", &format!("{role}@"), 1)
    }

    /// A plain connection to this database (to tamper with it, or count rows), its
    /// search path on the ledger's schema.
    pub fn client(&self) -> postgres::Client {
        connect_to_ledger(&self.url)
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&admin_url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A plain connection to `url` with the ledger's schema first on its search path (the
/// tool's own sessions set it at connect).
pub fn connect_to_ledger(url: &str) -> postgres::Client {
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    c.batch_execute("SET search_path = dlq, public")
        .expect("search path");
    c
}

/// The manual's grants for the team's role, as written there (docs/ledger.md), for `role`.
pub fn readme_grants(role: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ledger.md"))
            .expect("docs/ledger.md");
    let start = readme
        .find("GRANT USAGE ON SCHEMA dlq TO dlq_team")
        .expect("the grants");
    let block = &readme[start..];
    let end = block.find("```").expect("end of the block");
    block[..end]
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("dlq_team", role)
}

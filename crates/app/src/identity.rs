//! Who is acting, from the OS — never from the environment.

/// Who is acting: the account of the process's real uid, from the OS — never from the
/// environment (`USER=alice` must not make anyone alice in the audit log). Test builds
/// (feature `test-hooks`) may set `DLQ_TRIAGE_ACTOR` to play several people.
pub fn current_actor() -> String {
    if cfg!(any(test, feature = "test-hooks")) {
        if let Some(a) = std::env::var("DLQ_TRIAGE_ACTOR")
            .ok()
            .filter(|a| !a.is_empty())
        {
            return a;
        }
    }
    let uid = dlq_core::access::real_uid();
    uid.and_then(account_name)
        .or_else(|| uid.map(|u| format!("uid:{u}")))
        .unwrap_or_else(|| "unknown".into())
}

/// The account name of a uid from /etc/passwd (no environment needed: cron, tmux, sudo).
fn account_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2].parse() == Ok(uid)).then(|| f[0].to_string())
    })
}

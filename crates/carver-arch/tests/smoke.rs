use carver_arch::HardwareDb;

#[test]
fn h100_loads() {
    let db = HardwareDb::embedded().unwrap();
    let h = db.get("h100").unwrap();
    assert_eq!(h.sm.count, 132);
    assert_eq!(h.shared_memory.per_block_optin_bytes, 232448);
}

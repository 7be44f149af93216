// The dashboard scripts' one wait: polls `check` every 50 ms until it answers true, for
// at most 30 s, and fails with what it last answered.
export const until = async (what, check) => {
  const deadline = Date.now() + 30000;
  for (;;) {
    const got = await check().catch((e) => "error: " + e.message);
    if (got === true) return;
    if (Date.now() > deadline) throw new Error(`${what}: timed out, last saw ${JSON.stringify(got)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

// The draft's rule tests (docs/rule-tests.md, "Tests on the masters";
// GET /squall/v1/draft/tests): their cases listed under the draft, run
// against it on demand, each with pass or fail and the failures' text. A
// deploy refused with TESTS_FAILED shows its failures here too.
import { el, fill, $ } from './dom.js';

const base = '/squall/v1/draft/tests';
const errorText = (e) => `${e.code ? e.code + ': ' : ''}${e.message}`;

export class DraftTests {
  constructor(session) {
    this.session = session;
    this.draft = '';
    this.files = [];
    $('draft-tests-run').addEventListener('click', () => this.run());
  }

  q() {
    return new URLSearchParams({ auth: this.session.auth().name, draft: this.draft }).toString();
  }

  // load reads the tests of draft id ('' hides the panel) and lists their
  // cases, not run yet.
  async load(id) {
    this.draft = id;
    this.files = [];
    $('draft-tests').hidden = !id;
    $('draft-tests-error').textContent = '';
    $('draft-tests-summary').textContent = '';
    if (!id) return;
    $('draft-tests-run').hidden = true;
    try {
      const v = await this.session.request('GET', `${base}?${this.q()}`);
      this.files = v.files;
      $('draft-tests-run').hidden = !v.cases;
      $('draft-tests-summary').textContent = v.cases
        ? `${v.cases} case${v.cases === 1 ? '' : 's'} in ${v.files.length} file${v.files.length === 1 ? '' : 's'}: a deploy runs them first and is refused when one fails.`
        : 'No tests: attach some with squall tree tests put or squall tree apply --tests.';
      this.draw(null);
    } catch (e) {
      fill($('draft-tests-table').tBodies[0]);
      $('draft-tests-summary').textContent = e.code === 'FEATURE_LEVEL'
        ? 'The masters keep no tests with the draft until every one is upgraded (feature level 5).'
        : '';
      if (e.code !== 'FEATURE_LEVEL') $('draft-tests-error').textContent = errorText(e);
    }
  }

  // draw lists every case, with its result when run holds one.
  draw(run) {
    const results = new Map();
    for (const f of (run && run.files) || []) for (const c of f.cases) results.set(`${f.file}\n${c.name}`, c);
    const rows = [];
    for (const f of this.files) {
      for (const name of f.cases) {
        const r = results.get(`${f.name}\n${name}`);
        const state = r ? (r.passed ? 'passed' : 'failed') : 'not-run';
        rows.push(el('tr', { 'data-file': f.name, 'data-case': name, 'data-result': state },
          el('td', {}, f.name), el('td', {}, name),
          el('td', { class: `test-${state}` }, r ? (r.passed ? 'pass' : 'FAIL') : '—',
            r && !r.passed ? el('ul', { class: 'failures' }, r.failures.map((x) => el('li', {}, x.text))) : null)));
      }
    }
    fill($('draft-tests-table').tBodies[0], rows);
  }

  // run runs the tests against the draft.
  async run() {
    $('draft-tests-error').textContent = '';
    try {
      this.show(await this.session.request('POST', `${base}/run?${this.q()}`));
    } catch (e) {
      $('draft-tests-error').textContent = errorText(e);
    }
  }

  // show shows a run's results (the answer of /run, or the details of a
  // deploy refused with TESTS_FAILED).
  show(run) {
    if (!run || !Array.isArray(run.files)) return;
    this.draw(run);
    $('draft-tests-summary').textContent = run.passed
      ? `All ${run.cases} case${run.cases === 1 ? '' : 's'} passed.`
      : `${run.failed} of ${run.cases} cases failed: a deploy is refused until they pass.`;
  }
}

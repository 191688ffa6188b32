"""The accessibility audit the browser tests run on every website page, slide deck and the Voilà demo page.

axe-core (the copy bundled by the ``axe-playwright-python`` package, so nothing is fetched) is injected into the
page as it stands in the browser and run with the WCAG 2.0/2.1 level A and AA rules; a violation whose impact is
"serious" or "critical" fails the page. :func:`audit` returns one line per failing rule, naming the elements
(their CSS selectors, the first few) so the report says what to fix.

The two colour rules (color-contrast, link-in-text-block) cost most of axe's time on a notebook page, where code
listings make thousands of text elements that share a few styles. They run on a sample: one element for each
distinct look (text colour, background colour, font size and weight, and the classes of the element and its
two ancestors); elements that look the same in the same surroundings have the same contrast. Every other rule
runs on the whole page, in the same axe run (each run walks the whole page once before its rules start): the
colour rules' selectors are narrowed to the sample for that run. ``sample=False`` runs the colour rules on every
element too.
"""

from __future__ import annotations

from functools import lru_cache

WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING_IMPACTS = ("serious", "critical")


@lru_cache(maxsize=1)
def axe_script() -> str:
    from axe_playwright_python.sync_playwright import Axe

    return Axe().axe_script


JS_SAMPLE = """(root) => {
  const scope = root ? document.querySelector(root) : document.body;
  document.querySelectorAll('[data-axe-sample]').forEach(el => el.removeAttribute('data-axe-sample'));
  const seen = new Set();
  let n = 0;
  for (const el of scope.querySelectorAll('*')) {
    if (!Array.from(el.childNodes).some(c => c.nodeType === 3 && c.textContent.trim())) continue;
    const s = getComputedStyle(el), p = el.parentElement, g = p && p.parentElement;
    const key = [s.color, s.backgroundColor, s.fontSize, s.fontWeight, el.tagName, el.className,
                 p && p.className, g && g.className].join('|');
    if (seen.has(key)) continue;
    seen.add(key); el.setAttribute('data-axe-sample', ''); n++;
  }
  return n;
}"""

JS_RUN = """([context, options]) => axe.run(context, options).then(r => r.violations.map(v => ({id: v.id,
  impact: v.impact, help: v.help,
  nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: (n.failureSummary || '').slice(0, 300)}))})))"""


# The two colour rules, and their selectors for a sampled run: a sampled element and what it holds (axe's own
# selectors are "*" and links); axe's matches() still decides which of those the rule applies to.
SAMPLED_SELECTORS = {
    "color-contrast": "[data-axe-sample], [data-axe-sample] *",
    "link-in-text-block": "a[href][data-axe-sample], [data-axe-sample] a[href], "
                          "[role=link][data-axe-sample], [data-axe-sample] [role=link]",
}


def violations(page, context: str | None = None, sample: bool = True) -> list[dict]:
    """axe's violations of the WCAG 2.1 A/AA rules on the page (or within ``context``, a CSS selector)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_script())
    rules = page.evaluate("(tags) => axe.getRules(tags).filter(r => !r.tags.includes('experimental'))"
                          ".map(r => r.ruleId)", WCAG_TAGS)
    where = {"include": [[context]]} if context else {"exclude": []}
    options = {"runOnly": {"type": "rule", "values": rules}, "resultTypes": ["violations"]}
    if not sample:
        return page.evaluate(JS_RUN, [where, options])
    page.evaluate(JS_SAMPLE, context)
    page.evaluate("(sel) => axe.configure({rules: Object.entries(sel).map(([id, selector]) => ({id, selector}))})",
                  SAMPLED_SELECTORS)
    try:
        return page.evaluate(JS_RUN, [where, options])
    finally:
        page.evaluate("() => axe.reset()")   # the rules' own selectors again, for a later run on this page


def audit(page, context: str | None = None, sample: bool = True, known: dict[str, str] | None = None) -> list[str]:
    """One line per serious or critical WCAG 2.1 A/AA violation on the page: the rule, its help, where.

    ``known`` maps a rule to the JavaScript test (of an element ``el``) of the elements it is known to fail on and
    that this project cannot change (a library's own markup); only those elements are let through.
    """
    found = []
    for v in violations(page, context, sample):
        if v["impact"] not in FAILING_IMPACTS:
            continue
        nodes = v["nodes"]
        if known and v["id"] in known:
            nodes = [n for n in nodes if not page.evaluate(
                f"(sel) => {{ const el = document.querySelector(sel); return !!el && ({known[v['id']]}); }}", n["target"])]
        if nodes:
            found.append(f"axe {v['impact']} {v['id']} ({v['help']}): {len(nodes)} element(s), e.g. "
                         + "; ".join(n["target"][:120] for n in nodes[:3]))
    return found

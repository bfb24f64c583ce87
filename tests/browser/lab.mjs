// Drives a running JupyterLab in Debian's Chromium (through playwright-core,
// which downloads no browser) against the mahtab kernel, as a person would:
// open the notebook, pick the kernel, run all cells, answer input(), move a
// widget, check what %%ask shows, then interrupt a long cell with the stop
// button, run one more cell, draw an agent graph (%ask_graph, Mermaid), and
// stop a cell at a breakpoint set in its gutter with the debugger on.
//
// Environment: LAB_URL (http://127.0.0.1:PORT), LAB_TOKEN, NOTEBOOK (path
// relative to Lab's root), ARTIFACTS (a directory for screenshots: the page
// after Run All, after the interrupt, or where a check failed).
// Exits 0 when every check passed; otherwise prints the failed step and exits 1.

import { mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const { LAB_URL, LAB_TOKEN, NOTEBOOK, ARTIFACTS } = process.env;
for (const [name, value] of Object.entries({ LAB_URL, LAB_TOKEN, NOTEBOOK, ARTIFACTS })) {
  if (!value) throw new Error(`${name} is not set`);
}

const KERNEL = 'Mahtab (Python + AI)';
const LOAD_TIMEOUT = 60_000; // Lab's page and the kernel's start
const CELL_TIMEOUT = 30_000; // an ordinary cell
const ASK_TIMEOUT = 60_000; // a scripted model answers at once; Run All gets there first
// The long cell sleeps 60 s: KeyboardInterrupt within this bound can only come
// from the stop button.
const INTERRUPT_TIMEOUT = 20_000;

let step = 'start';
const started = Date.now();
function stamped(message) {
  console.log(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${message}`);
}
function log(message) {
  step = message;
  stamped(message);
}

// A fresh profile for every run: nothing cached or remembered from before.
const profile = mkdtempSync(join(tmpdir(), 'mahtab-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
  viewport: { width: 1280, height: 1000 },
});
const page = context.pages()[0] ?? (await context.newPage());
page.on('pageerror', (error) => console.log(`page error: ${error.message}`));
// Kernel websockets as the page opens and loses them, and the page's warnings:
// when a run fails, these lines say whether the page reached its kernel.
const withoutToken = (text) => text.replace(/token=[^&\s'"]*/g, 'token=...');
page.on('websocket', (ws) => {
  const url = withoutToken(ws.url());
  stamped(`websocket opened: ${url}`);
  ws.on('close', () => stamped(`websocket closed: ${url}`));
});
page.on('console', (message) => {
  if (['warning', 'error'].includes(message.type())) {
    stamped(`console.${message.type()}: ${withoutToken(message.text()).slice(0, 300)}`);
  }
});
mkdirSync(ARTIFACTS, { recursive: true });

async function screenshot(name) {
  const path = join(ARTIFACTS, `lab-${name}.png`);
  await page.screenshot({ path });
  console.log(`screenshot: ${path}`);
}

/** The notebook's cells, in order. */
const cells = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell');

/** The code cell whose source starts with `text`. */
function cellStartingWith(text) {
  return cells.filter({ has: page.locator('.jp-InputArea-editor .cm-line').first().filter({ hasText: text }) });
}

async function expectVisible(locator, what, timeout = CELL_TIMEOUT) {
  log(`waiting for ${what}`);
  await locator.first().waitFor({ state: 'visible', timeout });
}

/** Adds a code cell after the last one and types `code` into it. */
async function newCell(code) {
  await cells.last().locator('.jp-InputPrompt').click();
  await page.keyboard.press('Escape'); // command mode
  await page.keyboard.press('b'); // insert a cell below and select it
  const cell = cells.last();
  await cell.locator('.cm-content').click();
  await page.keyboard.type(code);
  return cell;
}

/** Adds a code cell after the last one, types `code` into it and runs it in place. */
async function runNewCell(code) {
  const cell = await newCell(code);
  await page.keyboard.press('Control+Enter'); // run, stay on the cell
  return cell;
}

try {
  log('opening the notebook');
  await page.goto(`${LAB_URL}/lab/tree/${NOTEBOOK}?token=${LAB_TOKEN}`);

  // The notebook carries no kernelspec, so Lab asks which kernel to start,
  // unless the server has just one (a gateway serving only mahtab's), which
  // Lab starts at once.
  const dialogHeader = page.locator('.jp-Dialog-header', { hasText: 'Select Kernel' });
  const kernelName = page.locator('.jp-Toolbar-kernelName').getByText(KERNEL);
  await expectVisible(dialogHeader.or(kernelName), 'the kernel dialog or a started kernel', LOAD_TIMEOUT);
  if (await dialogHeader.isVisible()) {
    const dialog = page.locator('.jp-Dialog');
    await dialog.locator('select').selectOption({ label: KERNEL });
    await dialog.getByRole('button', { name: 'Select' }).click();
  }
  await expectVisible(kernelName, 'the kernel name in the toolbar');
  await expectVisible(page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]'), 'an idle kernel', LOAD_TIMEOUT);

  log('running all cells (Run menu)');
  await page.getByRole('menuitem', { name: 'Run', exact: true }).click();
  await page.getByRole('menuitem', { name: /^Run All Cells/ }).click();

  // Lab takes input, so input() shows a box in the cell and waits for it.
  const stdin = page.locator('.jp-Stdin-input');
  await expectVisible(stdin, 'the input() box');
  await stdin.fill('Lab');
  await stdin.press('Enter');
  await expectVisible(page.locator('.jp-OutputArea-output').getByText('Hello, Lab!'), 'the greeting');

  // %%ask, the last cell: streamed text, then the code panel (Markdown: a bold
  // title and the code block), the output panel and the run's summary, which
  // ends the run (so the panels are checked once it is there).
  const ask = cellStartingWith('%%ask');
  await expectVisible(ask.locator('[data-mime-type="application/vnd.jupyter.stdout"]').getByText('Here is the code.'),
    'the streamed %%ask text', ASK_TIMEOUT);
  // The cell asks for approval (--approve always) before its code runs.
  const approval = ask.locator('.jp-Stdin-input');
  await expectVisible(approval, 'the approval question of %%ask', ASK_TIMEOUT);
  const question = await ask.locator('.jp-Stdin-prompt').innerText();
  if (!question.includes('Run this code?')) throw new Error(`the approval question reads: ${question}`);
  await approval.fill('y');
  await approval.press('Enter');
  const markdown = ask.locator('.jp-RenderedMarkdown');
  await expectVisible(markdown.getByText('fake-model'), 'the summary panel of %%ask', ASK_TIMEOUT);
  const changed = markdown.filter({ has: page.locator('strong', { hasText: /^changed$/ }) });
  await expectVisible(changed.getByText('answer: int = 42'), 'the "changed" panel of %%ask', 1000);
  console.log(`%%ask cell as shown:\n${(await ask.locator('.jp-OutputArea').innerText()).slice(0, 2000)}`);
  await expectVisible(markdown.filter({ has: page.locator('strong', { hasText: /^code$/ }) }).locator('pre code'),
    'the rendered code panel', 1000);
  await expectVisible(markdown.filter({ has: page.locator('strong', { hasText: /^(output|error)$/ }) }),
    'the output panel', 1000);
  await expectVisible(page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]'), 'the end of Run All');
  const unfinished = await cells.locator('.jp-InputPrompt').filter({ hasText: /\[[ *]?\]/ }).count();
  if (unfinished) throw new Error(`${unfinished} cells did not run to the end`);

  await expectVisible(cellStartingWith('import pandas').locator('.jp-RenderedHTMLCommon table.dataframe'), 'the pandas table');
  const plot = cellStartingWith('import matplotlib').locator('.jp-RenderedImage img[src^="data:image/png"]');
  await expectVisible(plot, 'the matplotlib plot');
  const plotWidth = await plot.evaluate((img) => img.naturalWidth);
  if (!(plotWidth > 100)) throw new Error(`the plot is ${plotWidth} px wide`);

  // The slider's value goes over a comm to the kernel, whose callback updates the label.
  const widget = cellStartingWith('import ipywidgets');
  await expectVisible(widget.locator('.widget-slider'), 'the slider widget');
  await expectVisible(widget.getByText('3 squared is 9'), 'the label computed in the kernel');
  await widget.locator('.widget-slider [role="slider"], .widget-slider .noUi-handle').first().focus();
  await page.keyboard.press('ArrowRight');
  await expectVisible(widget.getByText('4 squared is 16'), 'the label after moving the slider');

  await ask.scrollIntoViewIfNeeded();
  await screenshot('run-all');

  log('running a long cell and pressing stop');
  const sleeping = await runNewCell("print('sl' + 'eeping', flush=True); import time; time.sleep(60)");
  await expectVisible(sleeping.getByText('sleeping'), 'the long cell to start');
  await page.locator('.jp-NotebookPanel-toolbar [data-command="notebook:interrupt-kernel"]').click();
  await expectVisible(sleeping.locator('.jp-OutputArea-output').getByText('KeyboardInterrupt'), 'KeyboardInterrupt', INTERRUPT_TIMEOUT);

  const after = await runNewCell('1+1');
  await expectVisible(after.locator('.jp-OutputArea-executeResult').getByText('2', { exact: true }), 'the result of 1+1');

  await after.scrollIntoViewIfNeeded();
  await screenshot('interrupt');

  // %ask_graph draws a graph as Mermaid in Markdown, which Lab renders as a diagram.
  log('drawing the default graph');
  const graph = await runNewCell('%ask_graph default');
  await expectVisible(graph.locator('.jp-OutputArea-output'), 'the output of %ask_graph');
  await graph.scrollIntoViewIfNeeded();
  // Lab draws the diagram as an SVG image.
  const diagram = graph.locator('.jp-RenderedMermaid img[src^="data:image/svg+xml"]');
  await expectVisible(diagram, 'the Mermaid diagram of the default graph');
  const drawn = decodeURIComponent(await diagram.first().getAttribute('src'));
  for (const node of ['generate', 'extract', 'execute', 'reflect']) {
    if (!drawn.includes(node)) throw new Error(`the diagram has no node ${node}`);
  }
  await screenshot('graph');

  // The debugger: the bug button turns it on, a click in a cell's gutter sets
  // a breakpoint, running the cell stops there (the variables panel shows a
  // value of the cell's), and Continue lets it finish.
  log('turning the debugger on');
  const bug = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-DebuggerBugButton');
  await expectVisible(bug.locator('button:not([disabled])'), 'the enabled debugger button', LOAD_TIMEOUT);
  await bug.locator('button').click();
  await expectVisible(page.locator('.jp-DebuggerBugButton button[aria-pressed="true"]'), 'the debugger on');
  const debugged = await newCell('x_dbg = 40\ny_dbg = x_dbg + 2\nprint(y_dbg)');
  log('setting a breakpoint on line 2');
  await debugged.scrollIntoViewIfNeeded();
  // A click in the breakpoint gutter, level with line 2 (CodeMirror finds
  // the line from where the click is).
  const gutter = debugged.locator('.cm-gutter.cm-breakpoint-gutter');
  await gutter.first().waitFor({ state: 'attached', timeout: CELL_TIMEOUT });
  const column = await gutter.first().boundingBox();
  const line = await debugged.locator('.cm-line').nth(1).boundingBox();
  await page.mouse.click(column.x + column.width / 2, line.y + line.height / 2);
  log('waiting for the breakpoint marker');
  await debugged.locator('.cm-breakpoint-icon').first().waitFor({ state: 'attached', timeout: CELL_TIMEOUT });
  // The Breakpoints panel lists it once the kernel has confirmed it.
  await expectVisible(page.locator('.jp-DebuggerBreakpoint .jp-DebuggerBreakpoint-line').getByText('2', { exact: true }),
    'the breakpoint confirmed by the kernel');
  await debugged.locator('.cm-content').click();
  await page.keyboard.press('Control+Enter');
  await expectVisible(page.locator('.jp-DebuggerPausedButton'), 'the cell paused at the breakpoint');
  const variables = page.locator('.jp-DebuggerVariables-body');
  await expectVisible(variables.getByText('x_dbg'), 'x_dbg in the variables panel');
  const shown = await variables.first().innerText();
  if (!shown.includes('40')) throw new Error(`the variables panel does not show 40:\n${shown}`);
  await screenshot('debugger');
  log('continuing');
  await page.locator('.jp-DebuggerPausedButton').first().click();
  await expectVisible(debugged.locator('.jp-OutputArea-output').getByText('42', { exact: true }), 'the cell finishing');
  log('all checks passed');
} catch (error) {
  console.log(`FAILED while ${step}: ${error.message}`);
  await screenshot('failed').catch(() => {});
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}

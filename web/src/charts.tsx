import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './charts.css';
import { api } from './api';
import { ErrorMessage } from './components';
import { useLoad } from './hooks';

type Values = Array<number | null>;
type Range = 'hour' | 'day';

/** What `GET /metrics/series` answers (src/edge/metrics/traffic-series.ts). */
export interface SeriesView {
  available: boolean;
  node_id: string | null;
  endpoints: string[];
  range: Range;
  step_seconds: number;
  endpoint: string | null;
  time: number[];
  requests_per_second: Values;
  status: Record<'1xx' | '2xx' | '3xx' | '4xx' | '5xx', Values>;
  latency_ms: { p50: Values; p95: Values; p99: Values };
  bytes_in: Values;
  bytes_out: Values;
  agents_online: Values;
  totals: {
    requests: number;
    status: Record<'1xx' | '2xx' | '3xx' | '4xx' | '5xx', number>;
    latency_ms: { p50: number | null; p95: number | null; p99: number | null };
    bytes_in: number;
    bytes_out: number;
  } | null;
}

interface Line {
  label: string;
  color: string;
  values: Values;
}

/** Colours that read on the light and the dark theme. */
const COLORS = {
  blue: '#2f81f7',
  green: '#2da44e',
  grey: '#8c959f',
  orange: '#d4a72c',
  red: '#e5534b',
  purple: '#a371f7',
};

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#57606a';
}

/** The indices of values above zero with none beside them (no line reaches them). */
function isolated(values: Values): number[] {
  const empty = (v: number | null | undefined) => v === null || v === undefined || v === 0;
  const found: number[] = [];
  values.forEach((v, i) => {
    if (!empty(v) && empty(values[i - 1]) && empty(values[i + 1])) found.push(i);
  });
  return found;
}

/**
 * One uPlot chart as wide as its box: made once per set of lines, its data replaced when a new
 * reading comes (so the canvas stays while the page polls).
 */
function Chart({ title, time, lines }: { title: string; time: number[]; lines: Line[] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const data = [time, ...lines.map((l) => l.values)] as uPlot.AlignedData;
  const latest = useRef(data);
  latest.current = data;
  const shape = lines.map((l) => `${l.label}:${l.color}`).join(',');
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const text = cssVar('--muted');
    const grid = cssVar('--border');
    const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } };
    const made = new uPlot(
      {
        width: Math.max(el.clientWidth, 240),
        height: 180,
        series: [
          {},
          ...shape.split(',').map((s) => {
            const [label, color] = s.split(':') as [string, string];
            return {
              label,
              stroke: color,
              width: 2,
              // A value with nothing on either side draws no line: mark it with a dot.
              points: {
                show: true,
                size: 6,
                fill: color,
                filter: (u: uPlot, i: number) => isolated(u.data[i] as Values),
              },
            };
          }),
        ],
        axes: [axis, { ...axis, size: 56 }],
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(max, 1)] } },
        legend: { live: true },
      },
      latest.current,
      el,
    );
    plot.current = made;
    const resize = new ResizeObserver(() =>
      made.setSize({ width: Math.max(el.clientWidth, 240), height: 180 }),
    );
    resize.observe(el);
    return () => {
      resize.disconnect();
      made.destroy();
      plot.current = null;
    };
  }, [shape]);
  useEffect(() => {
    plot.current?.setData(latest.current);
  }, [time, lines]);
  return (
    <figure className="chart" aria-label={title}>
      <figcaption>{title}</figcaption>
      <div ref={box} />
    </figure>
  );
}

function ms(value: number | null): string {
  return value === null ? '–' : `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * Charts of this node's traffic (`GET /metrics/series`): requests per second, status classes,
 * p50/p95/p99 latency and bytes, for one endpoint or in total, over the last hour or day; with
 * `agents`, the agents online too. Polled every 10 seconds, the width of a bucket.
 */
export function TrafficCharts({
  endpoint,
  agents = false,
}: {
  endpoint?: string;
  agents?: boolean;
}) {
  const [range, setRange] = useState<Range>('hour');
  const load = useCallback(() => {
    const query = new URLSearchParams({ range });
    if (endpoint) query.set('endpoint', endpoint);
    return api<SeriesView>('GET', `/metrics/series?${query.toString()}`);
  }, [range, endpoint]);
  const { data, error } = useLoad(load, 10_000);
  const totals = data?.totals;
  const charts = useMemo<Array<{ title: string; lines: Line[] }>>(
    () =>
      data?.totals
        ? [
            {
              title: 'Requests per second',
              lines: [{ label: 'req/s', color: COLORS.blue, values: data.requests_per_second }],
            },
            {
              title: `Status classes (requests per ${data.step_seconds >= 60 ? `${data.step_seconds / 60} min` : `${data.step_seconds} s`})`,
              lines: [
                { label: '2xx', color: COLORS.green, values: data.status['2xx'] },
                { label: '3xx', color: COLORS.grey, values: data.status['3xx'] },
                { label: '4xx', color: COLORS.orange, values: data.status['4xx'] },
                { label: '5xx', color: COLORS.red, values: data.status['5xx'] },
              ],
            },
            {
              title: 'Latency (ms)',
              lines: [
                { label: 'p50', color: COLORS.blue, values: data.latency_ms.p50 },
                { label: 'p95', color: COLORS.orange, values: data.latency_ms.p95 },
                { label: 'p99', color: COLORS.red, values: data.latency_ms.p99 },
              ],
            },
            {
              title: 'Bytes',
              lines: [
                { label: 'in', color: COLORS.purple, values: data.bytes_in },
                { label: 'out', color: COLORS.green, values: data.bytes_out },
              ],
            },
            ...(agents
              ? [
                  {
                    title: 'Agents online',
                    lines: [{ label: 'agents', color: COLORS.blue, values: data.agents_online }],
                  },
                ]
              : []),
          ]
        : [],
    [data, agents],
  );
  return (
    <section className="card charts" aria-label="Traffic charts">
      <div className="card-head">
        <h2>Traffic, last {range}</h2>
        <div className="range" role="group" aria-label="Range">
          {(['hour', 'day'] as const).map((r) => (
            <button
              key={r}
              type="button"
              className={r === range ? '' : 'secondary'}
              aria-pressed={r === range}
              onClick={() => setRange(r)}
            >
              Last {r}
            </button>
          ))}
        </div>
      </div>
      <ErrorMessage error={error} />
      {data && !data.available ? (
        <p className="muted">This process runs no edge, so it has no traffic to chart.</p>
      ) : null}
      {totals ? (
        <p className="chart-totals" aria-label="Totals">
          <strong data-total="requests">{totals.requests}</strong> requests · 2xx{' '}
          <span data-total="2xx">{totals.status['2xx']}</span> · 3xx{' '}
          <span data-total="3xx">{totals.status['3xx']}</span> · 4xx{' '}
          <span data-total="4xx">{totals.status['4xx']}</span> · 5xx{' '}
          <span data-total="5xx">{totals.status['5xx']}</span> · p50 {ms(totals.latency_ms.p50)} ·
          p95 {ms(totals.latency_ms.p95)} · p99 {ms(totals.latency_ms.p99)} · in{' '}
          {bytes(totals.bytes_in)} · out {bytes(totals.bytes_out)}
        </p>
      ) : null}
      <div className="chart-grid">
        {charts.map((c) => (
          <Chart key={`${range}:${c.title}`} title={c.title} time={data!.time} lines={c.lines} />
        ))}
      </div>
      <p className="muted small">
        Counted by the node that served this page
        {data?.node_id ? (
          <>
            {' '}
            (<code>{data.node_id}</code>)
          </>
        ) : null}
        , in its memory: {range === 'hour' ? '10-second' : '5-minute'} buckets. Each node of a
        cluster charts its own traffic.
      </p>
    </section>
  );
}

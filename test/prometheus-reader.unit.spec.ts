import { describe, expect, it } from 'vitest';
import { parseExposition, valueOf } from './support/prometheus.js';

// The strict reader of the text exposition that the metrics tests read /metrics with
// (support/prometheus.ts): what it takes, and the breaches of the format it refuses.

const histogram = (buckets: string) => `# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n${buckets}`;

describe('the Prometheus text reader', () => {
  it('reads families, labels with escapes, special values, and a labelled histogram series by series', () => {
    const m = parseExposition([
      '# HELP c_total A "counter".', '# TYPE c_total counter', 'c_total{a="x\\"y\\\\z\\n",b="2"} 3', 'c_total{a="w"} 4 1700000000000', '',
      '# HELP g A gauge.', '# TYPE g gauge', 'g NaN', '',
      '# HELP d_seconds Durations.', '# TYPE d_seconds histogram',
      'd_seconds_bucket{le="1",f="a"} 1', 'd_seconds_bucket{le="+Inf",f="a"} 2', 'd_seconds_sum{f="a"} 2.5', 'd_seconds_count{f="a"} 2',
      'd_seconds_bucket{le="1",f="b"} 0', 'd_seconds_bucket{le="+Inf",f="b"} 1', 'd_seconds_sum{f="b"} 3', 'd_seconds_count{f="b"} 1', '',
    ].join('\n'));
    expect(m.get('c_total')!.help).toBe('A "counter".');
    expect(valueOf(m, 'c_total', { a: 'x"y\\z\n' })).toBe(3);
    expect(valueOf(m, 'c_total', { a: 'w' })).toBe(4);
    expect(valueOf(m, 'g')).toBeNaN();
    expect(valueOf(m, 'd_seconds_count', { f: 'a' })).toBe(2);
    expect(valueOf(m, 'd_seconds_count', { f: 'b' })).toBe(1);
    expect(valueOf(m, 'd_seconds_count', { f: 'c' })).toBeUndefined();
    expect(() => valueOf(m, 'c_total')).toThrow(/2 series/);
  });

  it('refuses what breaks the format', () => {
    const bad = {
      'a sample before its TYPE': 'x 1',
      'TYPE without HELP': '# TYPE x gauge\nx 1',
      'the same series twice': '# HELP x X.\n# TYPE x gauge\nx{a="1"} 1\nx{a="1"} 2',
      'a family split in two': '# HELP x X.\n# TYPE x gauge\nx 1\n# HELP y Y.\n# TYPE y gauge\ny 1\nx 2',
      'an unterminated label value': '# HELP x X.\n# TYPE x gauge\nx{a="1} 1',
      'an unknown escape': '# HELP x X.\n# TYPE x gauge\nx{a="\\t"} 1',
      'a value that is no number': '# HELP x X.\n# TYPE x gauge\nx one',
      'buckets that fall': histogram('d_seconds_bucket{le="1"} 2\nd_seconds_bucket{le="+Inf"} 1\nd_seconds_sum 1\nd_seconds_count 1'),
      '+Inf not the count': histogram('d_seconds_bucket{le="+Inf"} 1\nd_seconds_sum 1\nd_seconds_count 2'),
    };
    for (const [what, text] of Object.entries(bad)) expect(() => parseExposition(text), what).toThrow();
  });
});

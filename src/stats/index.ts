// Stats, the folder's face: the collector of the node's measurements behind GET /stats.
export { StatsCollector, type FeedPageFigures, type DriveFigures } from './collector.js';

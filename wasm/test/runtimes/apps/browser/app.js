// Vite and webpack: init() with no argument.
import { main, report } from './main.js';

report(main());

// Imported first by each test file that loads store modules which hash (see resolve.mjs).
import { register } from "node:module";

register("./resolve.mjs", import.meta.url);
